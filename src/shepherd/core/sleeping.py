"""Durable sleep (`ctx.sleep`): when a sleep wakes, and what a replay of it does.

A sleep is one step of its workflow (kind `sleep`, its `complete_by` the
wake-up instant, recorded when it is first reached). The task gives up its
claim in the same transaction and waits `pending` with `not_before` at the
wake-up, so the claim path wakes it and it holds no worker slot meanwhile.
On replay the recorded instant wins: a sleep whose instant has passed (or
that an operator woke, which moves the instant to the waking) returns at
once; one not over yet sleeps only what is left.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from shepherd.core.replay import SLEEP_NAME, NonDeterminism
from shepherd.core.states import ProcessState, StepKind
from shepherd.core.timing import LATEST_DUE, MAX_SECONDS, checked_delay

if TYPE_CHECKING:
    from shepherd.core.records import Step, Task

__all__ = [
    "Asleep",
    "Awake",
    "SleepDecision",
    "asleep_until",
    "checked_until",
    "decide",
    "wake_at_after",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Awake:
    """The sleep is over (or lasts nothing): the workflow goes on at once."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Asleep:
    """The task sleeps until `wake_at`: give up the claim, claimable again from then."""

    wake_at: datetime
    #: Whether the step is recorded already (a replay of an unfinished sleep).
    recorded: bool


SleepDecision = Awake | Asleep | NonDeterminism


def wake_at_after(seconds: object, *, now: datetime) -> datetime:
    """The wake-up of `ctx.sleep(seconds)` reached at `now`.

    Raises:
        ValueError: `seconds` is not a finite number >= 0 of at most 100 years;
            the message names it and what is wrong.
    """
    try:
        checked = checked_delay(seconds)
    except ValueError as exc:
        raise ValueError(str(exc).replace("delay", "ctx.sleep's seconds", 1)) from None
    return min(now + timedelta(seconds=min(checked, MAX_SECONDS)), LATEST_DUE)


def checked_until(value: object) -> datetime:
    """`ctx.sleep_until`'s instant: an aware datetime, in UTC, before LATEST_DUE.

    Raises:
        ValueError: A naive datetime, not a datetime, or out of range; the message says which.
    """
    if not isinstance(value, datetime):
        raise ValueError(f"ctx.sleep_until needs a datetime, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise ValueError(
            f"ctx.sleep_until needs an aware datetime (with its time zone), not the naive "
            f"{value.isoformat()}: use datetime(..., tzinfo=UTC)"
        )
    try:
        at = value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"ctx.sleep_until: {value.isoformat()} is out of range in UTC") from None
    if at > LATEST_DUE:
        raise ValueError(f"ctx.sleep_until needs an instant before {LATEST_DUE.year}")
    return at


def decide(recorded: Step | None, seq: int, wake_at: datetime, *, now: datetime) -> SleepDecision:
    """What a sleep until `wake_at`, reached at `seq` at `now`, does given the step recorded there.

    The recorded wake-up wins over `wake_at` (which a replay computes afresh).
    A sleep reached first with its instant past records nothing and returns
    (so does its replay, for the same reason).
    """
    if recorded is None:
        return Asleep(wake_at=wake_at, recorded=False) if wake_at > now else Awake()
    if recorded.kind is not StepKind.SLEEP:
        return NonDeterminism(seq=seq, recorded=recorded.agent, called=SLEEP_NAME)
    kept = recorded.complete_by
    if kept is None or kept <= now:
        return Awake()
    return Asleep(wake_at=kept, recorded=True)


def asleep_until(task: Task, *, now: datetime) -> datetime | None:
    """The wake-up of `task` if it sleeps at `now` (what an operator may wake), else None.

    Sleeping: `pending`, unowned, its latest sleep step's wake-up still ahead.
    """
    if task.process_state is not ProcessState.PENDING or task.locked_by is not None:
        return None
    wakes = [
        (s.seq, s.complete_by)
        for s in task.steps
        if s.kind is StepKind.SLEEP and s.complete_by is not None
    ]
    if not wakes:
        return None
    _, wake_at = max(wakes)
    return wake_at if wake_at > now else None
