"""When a task may start and by when it must end: delays, due times and deadlines.

A submit may put a task off (`delay` seconds, or `not_before` an aware
instant) and give it a `deadline` (seconds). The store turns them into the
task's `not_before` (on its own clock: the submit's instant plus the delay)
and its `deadline` (its `not_before` plus the deadline's seconds: a delayed
task's deadline counts from when it is due). These functions check the
values before anything is stored, and decide what a passed deadline does:
the supervisor cancels the task (`on_deadline`), as an operator's cancel
would, unless it is past that point already (`OVERDUE_STATES`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task

__all__ = [
    "DEADLINE_PASSED",
    "LATEST_DUE",
    "MAX_SECONDS",
    "OVERDUE_STATES",
    "DeadlineEffect",
    "checked_deadline",
    "checked_delay",
    "checked_not_before",
    "is_overdue",
    "on_deadline",
]

#: The reason a task whose deadline passed is cancelled with.
DEADLINE_PASSED = "deadline passed"
#: The longest delay or deadline, in seconds: 100 years (what a store's instants hold easily).
MAX_SECONDS = 100 * 365.25 * 86400
#: The latest instant a task may be due at (`not_before`): its deadline still fits after it.
LATEST_DUE = datetime(9000, 1, 1, tzinfo=UTC)
#: The states a passed deadline cancels. A task compensating is being undone already;
#: one in `error` waits for an operator (terminal until retried); an ended one has ended.
OVERDUE_STATES: frozenset[ProcessState] = frozenset({ProcessState.PENDING, ProcessState.PROCESSING})


def _seconds(name: str, value: object, *, zero: bool) -> float:
    """`value` as seconds: a finite real number, positive (or 0 when `zero`), at most MAX_SECONDS.

    Raises:
        ValueError: It is not; the message names `name` and what is wrong.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"{name} must be at most {MAX_SECONDS:g} seconds (100 years)") from None
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"{name} must be a finite number of seconds, not {value!r}")
    if seconds < 0 or (seconds == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ValueError(f"{name} must be {bound} seconds, not {value!r}")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{name} must be at most {MAX_SECONDS:g} seconds (100 years)")
    return seconds


def checked_delay(value: object) -> float:
    """A submit's `delay`: seconds >= 0, finite, at most MAX_SECONDS.

    Raises:
        ValueError: It is not; the message says why.
    """
    return _seconds("delay", value, zero=True)


def checked_deadline(value: object) -> float:
    """A submit's or a workflow's `deadline`: seconds > 0, finite, at most MAX_SECONDS.

    Raises:
        ValueError: It is not; the message says why.
    """
    return _seconds("deadline", value, zero=False)


def checked_not_before(value: object) -> datetime:
    """A submit's `not_before`: an aware datetime, in UTC, no later than LATEST_DUE.

    An instant already past is accepted: the task is claimable at once.

    Raises:
        ValueError: A naive datetime, not a datetime, or out of range; the message says which.
    """
    if not isinstance(value, datetime):
        raise ValueError(f"not_before must be a datetime, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(
            f"not_before must be an aware datetime (with its time zone), not the naive "
            f"{value.isoformat()}: use datetime(..., tzinfo=UTC) or datetime.now(UTC)"
        )
    try:
        at = value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in the year 0
        raise ValueError(f"not_before {value.isoformat()} is out of range in UTC") from None
    if at > LATEST_DUE:
        raise ValueError(f"not_before must be before {LATEST_DUE.year}, not {value.isoformat()}")
    return at


def is_overdue(task: Task, *, now: datetime) -> bool:
    """Whether `task`'s deadline has passed at `now` while it is in an OVERDUE_STATES state."""
    return (
        task.deadline is not None and task.deadline <= now and task.process_state in OVERDUE_STATES
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineEffect:
    """What a passed deadline writes: the task is cancelled as an operator cancels it.

    It turns `compensating` with `cancel_requested` (so it ends `cancelled`
    once its completed steps are undone), released and claimable at once
    under a new `lock_epoch` (its owner, if any, is fenced off), with `error`
    as its error unless it had one, and `event` recorded.
    """

    process_state: ProcessState
    error: dict[str, JsonValue]
    event: EventKind
    detail: dict[str, JsonValue]


def on_deadline(deadline: datetime) -> DeadlineEffect:
    """A task's `deadline` has passed (check `is_overdue` first)."""
    due = deadline.astimezone(UTC).isoformat()
    return DeadlineEffect(
        process_state=ProcessState.COMPENSATING,
        error={"reason": DEADLINE_PASSED, "deadline": due},
        event=EventKind.CANCEL_REQUESTED,
        detail={"reason": DEADLINE_PASSED, "deadline": due},
    )
