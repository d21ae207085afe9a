"""Batch handlers for operator actions: retry a task in `error`, cancel a task.

Both lock the task row first (`FOR UPDATE`), then check its state: an owner's
or a supervisor's concurrent write waits for this transaction, then finds its
epoch fenced off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from shepherd.core import operator as rules
from shepherd.errors import InvalidStateError, ShepherdError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.ops import CancelTask, RetryTask
from shepherd.store.postgres import keys
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.rows import TASK_COLUMNS, task_from_row
from shepherd.store.rows import Row, TaskCol

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["cancel", "retry"]

_LOCK_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = %s FOR UPDATE"
_STEP_STATE = "SELECT state FROM steps WHERE task_id = %s AND seq = %s"
_RESUBMIT_STEP = (
    "UPDATE steps SET state = 'not_started', error = NULL, "
    "payload_override = coalesce(%s, payload_override) WHERE task_id = %s AND seq = %s"
)
_RESET_FAILED = (
    "UPDATE steps SET state = 'not_started', error = NULL WHERE task_id = %s AND state = 'failed'"
)
_IN_UNDO = "SELECT 1 FROM steps WHERE task_id = %s AND kind = 'undo' LIMIT 1"
# An `OperatorEffect`, applied: the lock released, the epoch bumped, claimable now.
_APPLY = (
    "UPDATE tasks SET process_state = %s, cancel_requested = %s, failure_count = %s, "
    "error = CASE WHEN %s THEN NULL ELSE error END, locked_by = NULL, "
    "lock_epoch = lock_epoch + 1, complete_by = NULL, not_before = %s, updated_at = %s "
    f"WHERE id = %s RETURNING {TASK_COLUMNS}"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = %s"


@WRITES.handles(RetryTask)
async def retry(batch: PostgresBatch, ops: Sequence[RetryTask]) -> list[object]:
    """Put `error` tasks back to work from their failed step (or step `seq`)."""
    out: list[object] = []
    for op in ops:
        task_id, seq, payload = op.task_id, op.seq, op.payload
        row = await _lock(batch, task_id, rules.may_retry, "retry")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        try:
            override = None if payload is None else batch.dumps(payload)
        except Exception as exc:
            out.append(exc)
            continue
        if seq is not None:
            step_state = await batch.scalar(_STEP_STATE, (task_id, seq))
            refusal = rules.resubmit_refusal(seq, step_state)
            if refusal is not None:
                out.append(InvalidStateError(task_id, refusal, "resubmit step of"))
                continue
            await batch.send(_RESUBMIT_STEP, (override, task_id, seq))
            # The operator checked the step's unknown side effects: run them again.
            await keys.clear_started(batch, task_id, seq)
        await batch.send(_RESET_FAILED, (task_id,))
        undoing = await batch.scalar(_IN_UNDO, (task_id,)) is not None
        cancel_requested = bool(row[TaskCol.CANCEL_REQUESTED])
        effect = rules.on_retry(
            seq=seq, cancel_requested=cancel_requested, undoing=undoing, by=op.by
        )
        out.append(await _apply(batch, task_id, row, effect))
    return out


@WRITES.handles(CancelTask)
async def cancel(batch: PostgresBatch, ops: Sequence[CancelTask]) -> list[object]:
    """Ask for compensation of tasks that have not ended; they end `cancelled`."""
    out: list[object] = []
    for op in ops:
        task_id = op.task_id
        row = await _lock(batch, task_id, rules.may_cancel, "cancel")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        task = await _apply(batch, task_id, row, rules.on_cancel(by=op.by))
        await batch.send(_DROP_REQUESTS, (task_id,))
        out.append(task)
    return out


async def _lock(
    batch: PostgresBatch, task_id: str, may: Callable[[str], bool], action: str
) -> Row | ShepherdError:
    """Lock the task's row: the row, or the caller's error if `action` is not allowed now."""
    row = await (await batch.send(_LOCK_TASK, (task_id,))).fetchone()
    if row is None:
        return UnknownTaskError(task_id)
    if not may(row[TaskCol.PROCESS_STATE]):
        return InvalidStateError(task_id, row[TaskCol.PROCESS_STATE], action)
    return row


async def _apply(
    batch: PostgresBatch, task_id: str, row: Row, effect: rules.OperatorEffect
) -> Task:
    """Write `effect` to the task locked as `row`, with its event; return the task."""
    params = (
        str(effect.process_state),
        effect.cancel_requested,
        effect.failure_count,
        effect.clear_error,
        batch.now,
        batch.now,
        task_id,
    )
    updated = await (await batch.send(_APPLY, params)).fetchone()
    assert updated is not None  # the row is locked: it cannot have gone
    detail = dumps_detail(effect.detail)
    batch.event(task_id, row[TaskCol.KEY], row[TaskCol.REPLY_TO], effect.event, detail)
    batch.rings.add(ch.TASKS)
    return task_from_row(updated)
