"""Retention's rules: the cut-off instants, when a pass is due, when a pass runs another batch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core.retention import ENDED, cutoff, due, more
from shepherd.core.states import ProcessState

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def test_only_the_three_final_states_are_purged() -> None:
    assert {ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED} == ENDED
    # error waits for an operator; the others have not ended.
    waiting = {ProcessState.ERROR, ProcessState.PENDING}
    assert not (waiting | {ProcessState.PROCESSING, ProcessState.COMPENSATING}) & ENDED


def test_the_cutoff_is_now_minus_the_window() -> None:
    assert cutoff(NOW, 7 * 86400) == NOW - timedelta(days=7)
    assert cutoff(NOW, 0.5) == NOW - timedelta(seconds=0.5)


def test_a_window_longer_than_time_itself_purges_nothing() -> None:
    assert cutoff(NOW, 1e15) is None


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [
        (None, 0.0, True),  # the first pass runs at once
        (100.0, 159.9, False),
        (100.0, 160.0, True),
        (100.0, 1000.0, True),
    ],
)
def test_a_pass_is_due_once_per_interval(last: float | None, now: float, expected: bool) -> None:
    assert due(last, now=now, interval=60.0) is expected


@pytest.mark.parametrize(
    ("purged", "batches", "max_batches", "expected"),
    [
        (500, 1, 20, True),  # full: there may be more
        (499, 1, 20, False),  # not full: nothing is left
        (0, 1, None, False),
        (500, 20, 20, False),  # the pass's budget is spent
        (500, 1000, None, True),  # no budget: until done
    ],
)
def test_another_batch_runs_only_after_a_full_one_within_the_budget(
    purged: int, batches: int, max_batches: int | None, expected: bool
) -> None:
    assert more(purged, limit=500, batches=batches, max_batches=max_batches) is expected
