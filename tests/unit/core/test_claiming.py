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
    assert peek_limit(running, free, deep=False) == peeks


def test_a_deep_queue_is_claimed_a_batch_at_a_time() -> None:
    """Once a look found all it asked for, more may wait: claims of their own take them."""
    assert peek_limit(0, 64, deep=True) == 0
