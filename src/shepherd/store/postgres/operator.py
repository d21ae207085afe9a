"""Batch handlers for operator actions: retry a task in `error`, cancel a task.

Both lock the task row first (`FOR UPDATE`), then check its state: an owner's
or a supervisor's concurrent write waits for this transaction, then finds its
epoch fenced off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.records import JsonValue
from shepherd.errors import InvalidStateError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.postgres import keys
from shepherd.store.postgres.rows import TASK_COLUMNS, task_from_row

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch

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
_RETRY = (
    "UPDATE tasks SET process_state = %s, locked_by = NULL, lock_epoch = lock_epoch + 1, "
    "complete_by = NULL, failure_count = 0, not_before = %s, updated_at = %s, "
    f"error = NULL WHERE id = %s RETURNING {TASK_COLUMNS}"
)
_CANCEL = (
    "UPDATE tasks SET process_state = 'compensating', cancel_requested = true, "
    "locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "failure_count = 0, not_before = %s, updated_at = %s "
    f"WHERE id = %s RETURNING {TASK_COLUMNS}"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = %s"
_ENDED = ("processed", "compensated", "cancelled")


async def retry(batch: Batch, items: Sequence[tuple[str, int | None, JsonValue]]) -> list[object]:
    """Put `error` tasks back to work from their failed step (or step `seq`)."""
    now = batch.now
    out: list[object] = []
    for task_id, seq, payload in items:
        found = await batch.send(_LOCK_TASK, (task_id,))
        row = await found.fetchone()
        if row is None:
            out.append(UnknownTaskError(task_id))
            continue
        if row[6] != "error":
            out.append(InvalidStateError(task_id, row[6], "retry"))
            continue
        try:
            override = None if payload is None else batch.dumps(payload)
        except Exception as exc:
            out.append(exc)
            continue
        if seq is not None:
            state = await batch.send(_STEP_STATE, (task_id, seq))
            step = await state.fetchone()
            if step is None or step[0] == "completed":
                problem = "missing" if step is None else "completed"
                out.append(InvalidStateError(task_id, f"step {seq} {problem}", "resubmit step of"))
                continue
            await batch.send(_RESUBMIT_STEP, (override, task_id, seq))
            # The operator checked the step's unknown side effects: run them again.
            await keys.clear_started(batch, task_id, seq)
        await batch.send(_RESET_FAILED, (task_id,))
        in_undo = await (await batch.send(_IN_UNDO, (task_id,))).fetchone()
        target = "compensating" if in_undo or row[14] else "pending"
        updated = await (await batch.send(_RETRY, (target, now, now, task_id))).fetchone()
        assert updated is not None  # the row is locked: it cannot have gone
        batch.event(
            task_id, row[2], row[13], "retried", dumps_detail({"seq": seq, "state": target})
        )
        batch.rings.add(ch.TASKS)
        out.append(task_from_row(updated))
    return out


async def cancel(batch: Batch, items: Sequence[str]) -> list[object]:
    """Ask for compensation of tasks that have not ended; they end `cancelled`."""
    now = batch.now
    out: list[object] = []
    for task_id in items:
        row = await (await batch.send(_LOCK_TASK, (task_id,))).fetchone()
        if row is None:
            out.append(UnknownTaskError(task_id))
            continue
        if row[6] in _ENDED:
            out.append(InvalidStateError(task_id, row[6], "cancel"))
            continue
        updated = await (await batch.send(_CANCEL, (now, now, task_id))).fetchone()
        assert updated is not None  # the row is locked: it cannot have gone
        await batch.send(_DROP_REQUESTS, (task_id,))
        batch.event(task_id, row[2], row[13], "cancel_requested", dumps_detail({}))
        batch.rings.add(ch.TASKS)
        out.append(task_from_row(updated))
    return out
