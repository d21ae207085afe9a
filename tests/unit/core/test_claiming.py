"""`core.claiming`: a scheduler peeks only while it has little to do."""

from __future__ import annotations

import pytest

from shepherd.core.claiming import PEEK_BELOW, peek_limit


@pytest.mark.parametrize(
    ("running", "free", "peeks"),
    [
        (0, 64, PEEK_BELOW),  # idle: peek at a few
        (0, 2, 2),  # never more than it may run
        (PEEK_BELOW - 1, 64, 1),
        (PEEK_BELOW, 64, 0),  # busy: a claim of its own takes a batch
        (500, 64, 0),
        (0, 0, 0),
    ],
)
def test_peek_limit(running: int, free: int, peeks: int) -> None:
    assert peek_limit(running, free) == peeks
