"""Batch handlers for operator actions: retry a task in `error`, cancel a task.

Both read the task under the write lock, check its state, then bump its
`lock_epoch`: an owner's or a supervisor's later write finds its epoch fenced
off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from shepherd.core import operator as rules
from shepherd.errors import InvalidStateError, ShepherdError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.ops import CancelTask, RetryTask
from shepherd.store.sqlite.batch import WRITES
from shepherd.store.sqlite.keys import clear_started
from shepherd.store.sqlite.rows import TASK_COLUMNS, task_from_row

if TYPE_CHECKING:
    import sqlite3

    from shepherd.core.records import Task
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["cancel", "retry"]

_GET_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"
_STEP_STATE = "SELECT state FROM steps WHERE task_id = ? AND seq = ?"
_RESUBMIT_STEP = (
    "UPDATE steps SET state = 'not_started', error = NULL, "
    "payload_override = coalesce(?, payload_override) WHERE task_id = ? AND seq = ?"
)
_RESET_FAILED = (
    "UPDATE steps SET state = 'not_started', error = NULL WHERE task_id = ? AND state = 'failed'"
)
_IN_UNDO = "SELECT 1 FROM steps WHERE task_id = ? AND kind = 'undo' LIMIT 1"
# An `OperatorEffect`, applied: the lock released, the epoch bumped, claimable now.
_APPLY = (
    "UPDATE tasks SET process_state = ?, cancel_requested = ?, failure_count = ?, "
    "error = CASE WHEN ? THEN NULL ELSE error END, locked_by = NULL, "
    "lock_epoch = lock_epoch + 1, complete_by = NULL, not_before = ?, updated_at = ? "
    f"WHERE id = ? RETURNING {TASK_COLUMNS}"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"


@WRITES.handles(RetryTask)
def retry(batch: SqliteBatch, ops: Sequence[RetryTask]) -> list[object]:
    """Put tasks in `error` back to work (and resubmit one step, with a new payload)."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        task_id, seq, payload = op.task_id, op.seq, op.payload
        row = _find(conn, task_id, rules.may_retry, "retry")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        override = None if payload is None else batch.dumps(payload)
        if seq is not None:
            found = conn.execute(_STEP_STATE, (task_id, seq)).fetchone()
            refusal = rules.resubmit_refusal(seq, None if found is None else found["state"])
            if refusal is not None:
                out.append(InvalidStateError(task_id, refusal, "resubmit step of"))
                continue
            conn.execute(_RESUBMIT_STEP, (override, task_id, seq))
            # The operator checked the step's unknown side effects: run them again.
            clear_started(conn, task_id, seq)
        conn.execute(_RESET_FAILED, (task_id,))
        undoing = conn.execute(_IN_UNDO, (task_id,)).fetchone() is not None
        cancel_requested = bool(row["cancel_requested"])
        effect = rules.on_retry(
            seq=seq, cancel_requested=cancel_requested, undoing=undoing, by=op.by
        )
        out.append(_apply(batch, task_id, row, effect))
    return out


@WRITES.handles(CancelTask)
def cancel(batch: SqliteBatch, ops: Sequence[CancelTask]) -> list[object]:
    """Request cancellation: unended tasks turn `compensating`, their requests go."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        task_id = op.task_id
        row = _find(conn, task_id, rules.may_cancel, "cancel")
        if isinstance(row, ShepherdError):
            out.append(row)
            continue
        task = _apply(batch, task_id, row, rules.on_cancel(by=op.by))
        conn.execute(_DROP_REQUESTS, (task_id,))
        out.append(task)
    return out


def _find(
    conn: sqlite3.Connection, task_id: str, may: Callable[[str], bool], action: str
) -> sqlite3.Row | ShepherdError:
    """The task's row, or the caller's error if `action` is not allowed now."""
    row: sqlite3.Row | None = conn.execute(_GET_TASK, (task_id,)).fetchone()
    if row is None:
        return UnknownTaskError(task_id)
    if not may(row["process_state"]):
        return InvalidStateError(task_id, row["process_state"], action)
    return row


def _apply(
    batch: SqliteBatch, task_id: str, row: sqlite3.Row, effect: rules.OperatorEffect
) -> Task:
    """Write `effect` to the task read as `row`, with its event; return the task."""
    now = batch.now
    params = (
        str(effect.process_state),
        effect.cancel_requested,
        effect.failure_count,
        effect.clear_error,
        now,
        now,
        task_id,
    )
    updated = batch.conn.execute(_APPLY, params).fetchone()
    detail = dumps_detail(effect.detail)
    batch.events([(task_id, row["key"], row["reply_to"], effect.event, detail, now)])
    batch.rings.add(ch.TASKS)
    return task_from_row(updated)
