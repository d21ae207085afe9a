"""Signals (`app.signal`, `ctx.wait_for`): what a wait does at its seq, and what a signal is.

A signal is a named JSON payload sent to one task and kept in its inbox (the
`signals` table) until a wait of that name consumes it; signals of one name
are consumed in the order they were sent, each by exactly one wait. A wait is
one step of its workflow (kind `signal`, named `ctx.wait_for:<name>`): it is
`running` while the task waits (the task pending, unowned, claimable at the
timeout), `completed` with the consumed signal's payload as its result, or
`failed` at its timeout. A replay returns the recorded payload (or raises the
timeout again) and never consumes a second signal.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from shepherd.core.replay import NonDeterminism
from shepherd.core.states import StepKind, StepState
from shepherd.core.timing import LATEST_DUE, MAX_SECONDS, checked_delay

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Step, Task

__all__ = [
    "MAX_NAME_BYTES",
    "REFUSING",
    "WAIT_PREFIX",
    "Ask",
    "Received",
    "Sent",
    "Signal",
    "TimedOut",
    "WaitDecision",
    "decide",
    "step_name",
    "timeout_at_after",
    "wait_until",
    "waits_running",
]

#: The longest signal name, in bytes of UTF-8 (a name is never empty).
MAX_NAME_BYTES = 200
#: How a wait's step is named (its `agent` column): this, then the signal's name.
WAIT_PREFIX = "ctx.wait_for:"


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    """A signal sent to a task: its payload, and the wait that consumed it (if one did)."""

    id: int
    task_id: str
    name: str
    payload: JsonValue
    idempotency_key: str | None
    sent_at: datetime
    #: The seq of the wait step that consumed it, or None while it waits in the inbox.
    consumed_seq: int | None
    consumed_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """What `send_signal` did: the signal's id and its task's."""

    id: int
    task_id: str
    #: True when `idempotency_key` named a signal sent before: nothing new was stored.
    duplicate: bool
    #: True when a wait of the task consumed it in the same transaction.
    delivered: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """The wait has its signal: return `payload` to the workflow."""

    payload: JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedOut:
    """The wait reached its timeout with no signal: raise `SignalTimeoutError`."""

    timeout_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """Ask the store: consume the oldest signal, time out, or wait until `timeout_at`."""

    #: The wait's timeout (the recorded one on a replay), or None: no timeout.
    timeout_at: datetime | None


WaitDecision = Received | TimedOut | Ask | NonDeterminism


#: The states of a task that takes no signal: it ended for good, or it is being undone. A
#: task in `error` takes them: an operator's retry replays it, and its waits consume them.
REFUSING = frozenset({"processed", "compensating", "compensated", "cancelled"})


def waits_running(task: Task) -> list[str]:
    """The names of the signals `task` waits for now (its wait steps still running)."""
    return [
        s.agent.removeprefix(WAIT_PREFIX)
        for s in task.steps
        if s.kind is StepKind.SIGNAL and s.state is StepState.RUNNING
    ]


def step_name(name: str) -> str:
    """The `agent` column of a wait for signal `name` (what a non-determinism names)."""
    return WAIT_PREFIX + name


def timeout_at_after(timeout: object, *, now: datetime) -> datetime | None:
    """The timeout instant of `ctx.wait_for(..., timeout=timeout)` reached at `now`.

    Raises:
        ValueError: `timeout` is not None nor a finite number >= 0 of at most 100
            years; the message names it.
    """
    if timeout is None:
        return None
    try:
        seconds = checked_delay(timeout)
    except ValueError as exc:
        raise ValueError(str(exc).replace("delay", "ctx.wait_for's timeout", 1)) from None
    return min(now + timedelta(seconds=min(seconds, MAX_SECONDS)), LATEST_DUE)


def decide(
    recorded: Step | None, seq: int, name: str, *, timeout_at: datetime | None
) -> WaitDecision:
    """What a wait for `name` at `seq` does, given the step recorded there.

    The recorded timeout wins over `timeout_at` (which a replay computes afresh).
    """
    if recorded is None:
        return Ask(timeout_at=timeout_at)
    if recorded.kind is not StepKind.SIGNAL or recorded.agent != step_name(name):
        return NonDeterminism(seq=seq, recorded=recorded.agent, called=step_name(name))
    if recorded.state is StepState.COMPLETED:
        return Received(payload=recorded.result)
    if recorded.state is StepState.FAILED:
        return TimedOut(timeout_at=recorded.complete_by)
    return Ask(timeout_at=recorded.complete_by)


def wait_until(timeout_at: datetime | None) -> datetime:
    """The `not_before` of a task waiting until `timeout_at` (None: only a signal wakes it)."""
    return LATEST_DUE if timeout_at is None else timeout_at
