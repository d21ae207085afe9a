"""Moving a partition that drains first: its records and its rules.

A move puts a partition on another resource. Steps already sent for the
partition's entities run on the resource they were resolved to (their
resolution is recorded with them), so a move made at once lets a task's steps
for one entity run on two resources at the same time. A move that drains
does not: it marks the partition as moving (its `drain`), resolvers hold the
steps that would start for its entities until the mark goes, the mover waits
until no step resolved to the old resource is in flight, and only then puts
the partition on its new resource (in the same transaction as that last
check). The mark is a lease the mover renews while it waits: a mover that
died holds its partition for `MOVE_LEASE` seconds at most. Pure: no I/O, no
clock (the caller passes the instants).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from shepherd.core.jsonvalue import JsonValue
from shepherd.core.resources import Partition

__all__ = [
    "MOST_REPORTED",
    "MOVE_LEASE",
    "MOVE_POLL",
    "InFlightStep",
    "Moving",
    "PartitionMove",
    "check_move_timeout",
    "draining",
]

#: Seconds a move's mark lasts unrenewed; its mover renews it at every look (MOVE_POLL).
MOVE_LEASE = 15.0
#: Seconds between a mover's looks at the steps still in flight on the old resource.
MOVE_POLL = 0.5
#: The most steps in flight one look reports (a move waits for all of them all the same).
MOST_REPORTED = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlightStep:
    """A step in flight on a partition's resource: sent, with no outcome recorded yet."""

    task_id: str
    seq: int
    agent: str
    attempt: int

    def to_json(self) -> dict[str, JsonValue]:
        """The step as `--json` shows it."""
        return {
            "task_id": self.task_id,
            "seq": self.seq,
            "agent": self.agent,
            "attempt": self.attempt,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Moving:
    """One look of a move, as the store answers it (`Store.drain_partition`).

    Attributes:
        partition: The partition as stored after the look.
        before: The resource it was on before this move (None: created now).
        in_flight: The steps in flight on `before` at the look (at most MOST_REPORTED).
        moved: Whether the partition is on its new resource now; if not, it drains.
    """

    partition: Partition
    before: str | None
    in_flight: tuple[InFlightStep, ...]
    moved: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMove:
    """What a move did (`App.move_partition`, `shepherd partitions move`).

    Attributes:
        partition: The partition as stored at the end (its resource, its entities).
        previous: The resource it was on before (None: the move created it).
        waited_for: How many steps the move saw in flight and waited for.
        in_flight: The steps still in flight on `previous` when it moved: none
            after a drain, what was running for `now=True` or after a timeout.
        now: The move was made at once (`now=True`).
        timed_out: The drain passed its timeout and the move was made anyway.
    """

    partition: Partition
    previous: str | None
    waited_for: int = 0
    in_flight: tuple[InFlightStep, ...] = ()
    now: bool = False
    timed_out: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        """The move as `shepherd partitions move --json` prints it."""
        return {
            "partition": self.partition.name,
            "resource": self.partition.resource,
            "previous": self.previous,
            "entities": self.partition.entities,
            "waited_for": self.waited_for,
            "in_flight": [step.to_json() for step in self.in_flight],
            "now": self.now,
            "timed_out": self.timed_out,
        }


def check_move_timeout(timeout: object) -> str | None:
    """Why `timeout` cannot be a move's timeout (seconds above 0, finite, or None); None if it can."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return f"timeout must be a number of seconds, not {timeout!r}"
    if not timeout > 0 or not math.isfinite(timeout):
        return f"timeout must be above 0 seconds and finite, not {timeout}"
    return None


def draining(until: datetime | None, now: datetime) -> bool:
    """Whether a partition whose move's lease runs `until` is draining at `now`."""
    return until is not None and until > now
