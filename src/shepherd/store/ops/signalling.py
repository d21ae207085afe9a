"""Signals: send one to a task, wait for one in a workflow, list a task's (`core.signalling`)."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime

from shepherd.core.records import JsonValue
from shepherd.core.signalling import Sent, Signal
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["SendSignal", "Sent", "Signalling", "TaskSignals", "WaitSignal", "Waited"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Waited:
    """What `wait_signal` did: `received` (with `payload`), `timed_out`, or `waiting`."""

    outcome: str
    payload: JsonValue = None


@operation
class SendSignal(Write[Sent]):
    """Store signal `name` with `payload` for a task; deliver it at once if the task waits for it.

    The task is `task_id`, or the task of `workflow` whose key is `key`. In
    one transaction, the task's row held: a task that does not exist is
    refused (`UnknownTaskError`), one that ended or is being undone
    (`processed`, `compensating`, `compensated`, `cancelled`) too
    (`InvalidStateError`), and a payload that does not encode (`PayloadError`):
    nothing is stored. With an `idempotency_key` already used for a signal of
    that task, nothing is stored and that signal's id is returned
    (`duplicate`). Otherwise the signal is stored (a `signalled` event); if a
    wait step of that name is running, the signal is consumed by it (the
    step `completed` with the payload, a `signal_received` event) and a
    waiting task becomes claimable now, with its wake-up rung.
    """

    task_id: str | None
    name: str
    payload: JsonValue
    _: KW_ONLY
    workflow: str | None = None
    key: str | None = None
    idempotency_key: str | None = None
    #: Who sends it, recorded in the `signalled` event's detail, or None.
    by: str | None = None


@operation
class WaitSignal(Write[Waited]):
    """The holder's wait for signal `name` at `seq`: consume one, time out, or wait.

    Fenced by `locked_by` and `epoch` (else `StaleEpochError`, nothing
    written). In one transaction: a wait step at `seq` completed already (a
    sender consumed a signal into it) is `received`; else the oldest signal
    of `name` not consumed is consumed by `seq` (its step `completed` with the
    payload): `received`; else, `timeout_at` passed, the step is `failed`:
    `timed_out`; else the step is recorded `running` (its `complete_by` the
    timeout; one recorded already is kept) and the claim given up: the task
    `pending`, unowned, `not_before` the timeout (none: only a signal wakes
    it), a `waiting` event: `waiting`.
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    seq: int
    name: str
    timeout_at: datetime | None


@operation
class TaskSignals(Read[list[Signal]]):
    """The signals sent to a task, in the order sent (consumed ones with their wait's seq)."""

    task_id: str


class Signalling(Runs):
    """The store's methods for signals."""

    send_signal = method(SendSignal)
    wait_signal = method(WaitSignal)
    task_signals = method(TaskSignals)
