"""When a reply rides its workflow's next write: a pure decision of `core.riding`."""

from __future__ import annotations

import pytest

from shepherd.core.riding import RIDE_BELOW, rides


@pytest.mark.parametrize(
    ("backlog", "riding", "expected"),
    [
        (0, 0, True),  # the writer idle: alone, the reply would be a commit of its own
        (RIDE_BELOW - 1, 0, True),
        (0, RIDE_BELOW - 1, True),
        (RIDE_BELOW, 0, False),  # a busy writer's next batch carries it anyway
        (500, 0, False),
        (0, RIDE_BELOW, False),  # a burst of replies: the ones riding are writes to come
        (RIDE_BELOW // 2, RIDE_BELOW - RIDE_BELOW // 2, False),
    ],
)
def test_a_reply_rides_only_while_the_writes_to_come_are_few(
    backlog: int, riding: int, expected: bool
) -> None:
    assert rides(backlog, riding) is expected
