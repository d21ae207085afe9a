"""Operator actions on a task, for both backends: retry a task in `error`, cancel a task.

Both hold the task first (PostgreSQL locks its row `FOR UPDATE`; SQLite holds
the write lock), check its state (`core.operator` decides), then bump its
`lock_epoch`: an owner's or a supervisor's concurrent write waits for this
transaction, then finds its epoch fenced off.

A retry that gives step `seq` a new payload keeps the payload it replaced in
its `retried` event (`"replaced"`), as stored: it was written within the
store's payload limit, and one stored under a larger limit is recorded as
`{"truncated": true, "bytes": N}`, so the history never holds more than a
payload may.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shepherd.core import operator as rules
from shepherd.errors import InvalidStateError, ShepherdError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.rows import TASK_COLUMNS, TaskCol
from shepherd.store.sql import children
from shepherd.store.sql.keys import clear_started
from shepherd.store.sql.plan import first, send

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.ops import CancelTask, RetryTask
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["APPLY", "RESET_FAILED", "cancel", "retry"]

_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?{{for_update}}"
_STEP_STATE = (
    "SELECT state, coalesce(payload_override, request) FROM steps WHERE task_id = ? AND seq = ?"
)
_RESUBMIT_STEP = (
    "UPDATE steps SET state = 'not_started', error = NULL, "
    "payload_override = coalesce(?, payload_override) WHERE task_id = ? AND seq = ?"
)
#: A retried task's failed steps, to be run again (a bulk retry's too: `sql.bulk`).
RESET_FAILED = (
    "UPDATE steps SET state = 'not_started', error = NULL WHERE task_id = ? AND state = 'failed'"
)
_IN_UNDO = "SELECT 1 FROM steps WHERE task_id = ? AND kind = 'undo' LIMIT 1"
#: An `OperatorEffect`, applied: the lock released, the epoch bumped, claimable now
#: (a bulk retry's too, without the RETURNING: `sql.bulk`).
APPLY = (
    "UPDATE tasks SET process_state = ?, cancel_requested = ?, failure_count = ?, "
    "error = CASE WHEN ? THEN NULL ELSE error END, locked_by = NULL, "
    "lock_epoch = lock_epoch + 1, complete_by = NULL, not_before = ?, updated_at = ? "
    "WHERE id = ?"
)
_APPLY = f"{APPLY} RETURNING {TASK_COLUMNS}"
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"


def retry(batch: Writing, ops: Sequence[RetryTask]) -> Plan[list[object]]:
    """Put tasks in `error` back to work from their failed step (or step `seq`, with a new payload)."""
    d = batch.dialect
    out: list[object] = []
    for op in ops:
        task_id, seq, payload = op.task_id, op.seq, op.payload
        row = yield from _hold(batch, task_id, rules.may_retry, "retry")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        try:
            override = None if payload is None else batch.dumps(payload)
        except Exception as exc:
            out.append(exc)
            continue
        replaced: str | None = None
        if seq is not None:
            found = yield from first(d.sql(_STEP_STATE), (task_id, seq))
            refusal = rules.resubmit_refusal(seq, None if found is None else found[0])
            if refusal is not None:
                out.append(InvalidStateError(task_id, refusal, "resubmit step of"))
                continue
            assert found is not None  # a missing step is refused above
            if override is not None:
                replaced = _capped(batch, found[1])
            yield from send(d.sql(_RESUBMIT_STEP), (override, task_id, seq))
            # The operator checked the step's unknown side effects: run them again.
            yield from clear_started(d, task_id, seq)
        yield from send(d.sql(RESET_FAILED), (task_id,))
        undoing = (yield from first(d.sql(_IN_UNDO), (task_id,))) is not None
        cancel_requested = bool(row[TaskCol.CANCEL_REQUESTED])
        effect = rules.on_retry(
            seq=seq, cancel_requested=cancel_requested, undoing=undoing, by=op.by
        )
        out.append((yield from _apply(batch, task_id, row, effect, replaced=replaced)))
    return out


def _capped(batch: Writing, stored: str | None) -> str:
    """The JSON text of a step's payload as the event embeds it: within the payload limit."""
    if stored is None:
        return "null"
    size = len(stored) if stored.isascii() else len(stored.encode())
    if size <= batch.payload_limit:
        return stored
    return dumps_detail({"truncated": True, "bytes": size})


def cancel(batch: Writing, ops: Sequence[CancelTask]) -> Plan[list[object]]:
    """Request cancellation: unended tasks turn `compensating`, their requests go."""
    out: list[object] = []
    for op in ops:
        task_id = op.task_id
        row = yield from _hold(batch, task_id, rules.may_cancel, "cancel")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        task = yield from _apply(batch, task_id, row, rules.on_cancel(by=op.by))
        yield from send(batch.dialect.sql(_DROP_REQUESTS), (task_id,))
        # Its unended children (and theirs) are cancelled with it (`core.children`).
        yield from children.cancel_children(batch, [task_id], everything=True)
        out.append(task)
    return out


def _hold(
    batch: Writing, task_id: str, may: Callable[[str], bool], action: str
) -> Plan[tuple[Any, ...] | ShepherdError]:
    """The task's row, held; or the caller's error if `action` is not allowed now."""
    row = yield from first(batch.dialect.sql(_TASK), (task_id,))
    if row is None:
        return UnknownTaskError(task_id)
    if not may(row[TaskCol.PROCESS_STATE]):
        return InvalidStateError(task_id, row[TaskCol.PROCESS_STATE], action)
    return row


def _apply(
    batch: Writing,
    task_id: str,
    row: tuple[Any, ...],
    effect: rules.OperatorEffect,
    *,
    replaced: str | None = None,
) -> Plan[Task]:
    """Write `effect` to the task held as `row`, with its event; return the task.

    `replaced`, JSON text, joins the event's detail as `"replaced"` (a retry's old payload).
    """
    d, now = batch.dialect, batch.now
    params = (
        str(effect.process_state),
        effect.cancel_requested,
        effect.failure_count,
        effect.clear_error,
        now,
        now,
        task_id,
    )
    updated = yield from first(d.sql(_APPLY), params)
    assert updated is not None  # the row is held: it cannot have gone
    detail = (
        dumps_detail(effect.detail)
        if replaced is None
        else dumps_detail(effect.detail, replaced=replaced)
    )
    batch.event(task_id, row[TaskCol.KEY], row[TaskCol.REPLY_TO], effect.event, detail)
    batch.rings.add(ch.TASKS)
    return d.records.task(updated)
