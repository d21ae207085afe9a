"""The overview's throughput buckets: aligned slices of a window, filled from the store's counts."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from shepherd.core.overview import ThroughputBucket, bucket_starts, fill
from shepherd.core.states import ProcessState


def test_slices_are_aligned_and_the_last_holds_now() -> None:
    now = datetime(2026, 1, 1, 12, 30, 42, tzinfo=UTC)

    starts = bucket_starts(now, timedelta(hours=1), timedelta(minutes=1))

    assert len(starts) == 60
    assert starts[-1] == datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert starts[0] == datetime(2026, 1, 1, 11, 31, tzinfo=UTC)
    assert all(b - a == timedelta(minutes=1) for a, b in itertools.pairwise(starts))


def test_a_window_that_is_not_a_whole_number_of_buckets_is_rounded_up() -> None:
    now = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert len(bucket_starts(now, timedelta(seconds=90), timedelta(minutes=1))) == 2
    assert bucket_starts(now, timedelta(seconds=1), timedelta(minutes=5)) == [now]


def test_fill_sums_failures_and_keeps_empty_buckets() -> None:
    starts = bucket_starts(
        datetime(2026, 1, 1, tzinfo=UTC), timedelta(minutes=3), timedelta(minutes=1)
    )
    counts = {
        (0, ProcessState.PROCESSED): 4,
        (0, ProcessState.ERROR): 1,
        (0, ProcessState.COMPENSATED): 2,
        (2, ProcessState.CANCELLED): 3,
        (7, ProcessState.PROCESSED): 99,  # outside the window: not shown
    }

    assert fill(starts, counts) == [
        ThroughputBucket(start=starts[0], processed=4, errors=3, cancelled=0, compensated=2),
        ThroughputBucket(start=starts[1], processed=0, errors=0, cancelled=0),
        ThroughputBucket(start=starts[2], processed=0, errors=0, cancelled=3),
    ]
