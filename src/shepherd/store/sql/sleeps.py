"""A workflow's sleep and an operator's wake-up, for both backends (`core.sleeping`).

`sleep`: the holder records the sleep step (kind `sleep`, its `complete_by`
the wake-up; kept if already recorded, so a replay never moves it) and gives
up its claim in the same transaction: the task is `pending`, unowned, with
`not_before` at the wake-up, and the claim path wakes it. Fenced by the
claim's holder and epoch, like every owner's write.

`wake`: an operator moves a sleeping task's wake-up to now: its sleep step's
`complete_by` and its `not_before` (its row held first, as the other operator
actions hold it). A task that is not sleeping is refused, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.replay import SLEEP_NAME
from shepherd.errors import InvalidStateError, StaleEpochError, UnknownTaskError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.sql.plan import first, send

if TYPE_CHECKING:
    from shepherd.store.ops import SleepTask, WakeTask
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["sleep", "wake"]

_RELEASE = (
    "UPDATE tasks SET process_state = 'pending', locked_by = NULL, complete_by = NULL, "
    "not_before = ?{ts}, updated_at = ? "
    "WHERE id = ? AND lock_epoch = ? AND locked_by = ? AND process_state = 'processing' "
    "RETURNING key, reply_to"
)
_RECORD = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, started_at, "
    "finished_at) VALUES (?, ?, 'sleep', ?, 'completed', 1, ?{ts}, ?, ?{ts}) "
    "ON CONFLICT (task_id, seq) DO NOTHING"
)
_HELD = "SELECT process_state, locked_by, key, reply_to FROM tasks WHERE id = ?{for_update}"
_ASLEEP = (
    "SELECT seq FROM steps WHERE task_id = ? AND kind = 'sleep' AND complete_by > {now} "
    "ORDER BY seq DESC LIMIT 1"
)
_WAKE_STEP = "UPDATE steps SET complete_by = ?, finished_at = ? WHERE task_id = ? AND seq = ?"
_WAKE_TASK = "UPDATE tasks SET not_before = ?, updated_at = ? WHERE id = ?"


def sleep(batch: Writing, ops: Sequence[SleepTask]) -> Plan[list[object]]:
    """Record each sleep step and give up its task's claim until the wake-up (fenced)."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        wake = d.stored(op.wake_at)
        fence = (op.task_id, op.epoch, op.locked_by)
        row = yield from first(d.sql(_RELEASE), (wake, now, *fence))
        if row is None:
            out.append(StaleEpochError(op.task_id, op.epoch))
            continue
        yield from send(d.sql(_RECORD), (op.task_id, op.seq, SLEEP_NAME, wake, now, wake))
        detail = dumps_detail({"seq": op.seq, "wake_at": op.wake_at.isoformat()})
        batch.event(op.task_id, row[0], row[1], EventKind.SLEEPING, detail)
        out.append(None)
    # No ring: the task is not claimable before its wake-up, and an idle claimer
    # reads the next due time (`next_due`) before each wait, so none is woken for it.
    return out


def wake(batch: Writing, ops: Sequence[WakeTask]) -> Plan[list[object]]:
    """Wake each sleeping task now; refuse one that is not sleeping (unknown, claimed, ended)."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        held = yield from first(d.sql(_HELD), (op.task_id,))
        if held is None:
            out.append(UnknownTaskError(op.task_id))
            continue
        state, locked_by, key, reply_to = held
        found = None
        if state == "pending" and locked_by is None:
            found = yield from first(d.sql(_ASLEEP), (op.task_id, batch.instant))
        if found is None:
            told = state if state != "pending" or locked_by is not None else "pending, not asleep"
            out.append(InvalidStateError(op.task_id, f"{told} (not sleeping)", "wake"))
            continue
        yield from send(d.sql(_WAKE_STEP), (now, now, op.task_id, found[0]))
        yield from send(d.sql(_WAKE_TASK), (now, now, op.task_id))
        detail = dumps_detail({"seq": found[0], "by": op.by})
        batch.event(op.task_id, key, reply_to, EventKind.WOKEN, detail)
        batch.rings.add(ch.TASKS)
        out.append(None)
    return out
