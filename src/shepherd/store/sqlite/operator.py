"""Batch handlers for operator actions: retry a task in `error`, cancel a task.

Both read the task under the write lock, check its state, then bump its
`lock_epoch`: an owner's or a supervisor's later write finds its epoch fenced
off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.records import JsonValue
from shepherd.errors import InvalidStateError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.sqlite.keys import clear_started
from shepherd.store.sqlite.rows import TASK_COLUMNS, task_from_row

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import Batch

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
_RETRY = (
    "UPDATE tasks SET process_state = ?, locked_by = NULL, lock_epoch = lock_epoch + 1, "
    "complete_by = NULL, failure_count = 0, not_before = ?, updated_at = ?, "
    f"error = NULL WHERE id = ? RETURNING {TASK_COLUMNS}"
)
_CANCEL_STATE = "SELECT process_state, key, reply_to FROM tasks WHERE id = ?"
_CANCEL = (
    "UPDATE tasks SET process_state = 'compensating', cancel_requested = 1, "
    "locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "failure_count = 0, not_before = ?, updated_at = ? "
    f"WHERE id = ? RETURNING {TASK_COLUMNS}"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"


def retry(batch: Batch, items: list[tuple[str, int | None, JsonValue]]) -> list[object]:
    """Put tasks in `error` back to work (and resubmit one step, with a new payload)."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for task_id, seq, payload in items:
        row = conn.execute(_GET_TASK, (task_id,)).fetchone()
        if row is None:
            out.append(UnknownTaskError(task_id))
            continue
        if row["process_state"] != "error":
            out.append(InvalidStateError(task_id, row["process_state"], "retry"))
            continue
        override = None if payload is None else batch.dumps(payload)
        if seq is not None:
            found = conn.execute(_STEP_STATE, (task_id, seq)).fetchone()
            if found is None or found["state"] == "completed":
                out.append(
                    InvalidStateError(
                        task_id,
                        f"step {seq} {'missing' if found is None else 'completed'}",
                        "resubmit step of",
                    )
                )
                continue
            conn.execute(_RESUBMIT_STEP, (override, task_id, seq))
            # The operator checked the step's unknown side effects: run them again.
            clear_started(conn, task_id, seq)
        conn.execute(_RESET_FAILED, (task_id,))
        in_undo = conn.execute(_IN_UNDO, (task_id,)).fetchone()
        state = "compensating" if in_undo or row["cancel_requested"] else "pending"
        updated = conn.execute(_RETRY, (state, now, now, task_id)).fetchone()
        detail = dumps_detail({"seq": seq, "state": state})
        batch.events([(task_id, row["key"], row["reply_to"], "retried", detail, now)])
        batch.rings.add(ch.TASKS)
        out.append(task_from_row(updated))
    return out


def cancel(batch: Batch, items: list[str]) -> list[object]:
    """Request cancellation: unended tasks turn `compensating`, their requests go."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for task_id in items:
        row = conn.execute(_CANCEL_STATE, (task_id,)).fetchone()
        if row is None:
            out.append(UnknownTaskError(task_id))
            continue
        if row["process_state"] in ("processed", "compensated", "cancelled"):
            out.append(InvalidStateError(task_id, row["process_state"], "cancel"))
            continue
        updated = conn.execute(_CANCEL, (now, now, task_id)).fetchone()
        conn.execute(_DROP_REQUESTS, (task_id,))
        batch.events(
            [(task_id, row["key"], row["reply_to"], "cancel_requested", dumps_detail({}), now)]
        )
        batch.rings.add(ch.TASKS)
        out.append(task_from_row(updated))
    return out
