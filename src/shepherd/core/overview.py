"""What an operator's overview reads: operators (named tokens) and the ended tasks per minute.

`Operator` is a named token as the store lists it (the token itself is never
stored, only its hash). `ThroughputBucket` counts the tasks that ended in one
slice of time, by how they ended; `bucket_starts` cuts a window into slices
aligned on the bucket's length, and `fill` turns the store's counts per slice
into one bucket per slice, empty ones included, oldest first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import final

from shepherd.core.states import ProcessState

__all__ = ["ENDINGS", "Operator", "ThroughputBucket", "bucket_starts", "fill"]

#: Which counter of a bucket each state a task ends in adds to (`error` and
#: `compensated` are failures; a task retried after `error` no longer counts).
ENDINGS: dict[ProcessState, str] = {
    ProcessState.PROCESSED: "processed",
    ProcessState.ERROR: "errors",
    ProcessState.COMPENSATED: "errors",
    ProcessState.CANCELLED: "cancelled",
}


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Operator:
    """A named operator token, as the store keeps it (the token itself is not kept).

    Attributes:
        name: Who acts with the token; recorded with every action they take.
        created_at: When the token was made (store clock).
        last_used_at: When it last opened a session (to the minute), or None.
    """

    name: str
    created_at: datetime
    last_used_at: datetime | None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputBucket:
    """The tasks that ended in [start, start + bucket), by how they ended.

    Attributes:
        start: The slice's start (UTC).
        processed: Tasks that ended `processed`.
        errors: Tasks in `error`, or that ended `compensated`.
        cancelled: Tasks an operator cancelled.
        compensated: Of `errors`, the tasks that ended `compensated` (undone,
            not waiting for an operator): `errors - compensated` are in `error`.
    """

    start: datetime
    processed: int
    errors: int
    cancelled: int
    compensated: int = 0


def bucket_starts(now: datetime, window: timedelta, bucket: timedelta) -> list[datetime]:
    """The starts of the slices of `bucket` that cover the `window` ending at `now`.

    Slices are aligned on multiples of `bucket` since the Unix epoch; the last
    one holds `now`. There are ceil(window / bucket) of them, oldest first.
    """
    step = bucket.total_seconds()
    count = max(1, math.ceil(window.total_seconds() / step))
    last = math.floor(now.timestamp() / step) * step
    return [datetime.fromtimestamp(last - (count - 1 - i) * step, UTC) for i in range(count)]


def fill(
    starts: list[datetime], counts: dict[tuple[int, ProcessState], int]
) -> list[ThroughputBucket]:
    """One bucket per start, from `counts` keyed by (slice index, state ended in)."""
    out = []
    for index, start in enumerate(starts):
        sums = {"processed": 0, "errors": 0, "cancelled": 0}
        for state, field in ENDINGS.items():
            sums[field] += counts.get((index, state), 0)
        compensated = counts.get((index, ProcessState.COMPENSATED), 0)
        out.append(ThroughputBucket(start=start, compensated=compensated, **sums))
    return out
