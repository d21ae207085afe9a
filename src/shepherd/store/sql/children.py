"""Child workflows, for both backends: start one, park its parent, resume it, cancel down.

`start`: the parent's holder records step `seq` (kind `child`) and inserts the
child task and its `task_children` link in ONE transaction, fenced by the
claim's holder and epoch: the step record is the proof the child exists, so a
replay never starts it twice. An awaited child's step stays `running` until
the child ends; a started one (`start_workflow`) is `completed` at once, its
result the child's id. With `wait`, the parent also gives up its claim in the
same transaction (its one branch now waits on the child).

`wait`: the holder gives up its claim while every branch of its workflow waits
on a child: `pending`, unowned, claimable again at once if one of those
children's steps ended already, else not before `LATEST_DUE` (the end of a
child moves it to now). The row is held first, so that a child's end (which
holds the parent's row first too) is either seen here or sees this.

`resume`: a child ended (`processed`, `compensated` or `cancelled`), in its
own ending transaction: the parent's step gets the child's result (or fails
with the child's reason), and a parked parent becomes claimable now.

`cancel_children`: cancel the unended children of tasks (those awaited or
started with `cancel`; all of them when `everything`), and theirs in turn:
each turns `compensating` with `cancel_requested`, its reason naming the
parent, and its scheduler's claim is fenced off.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shepherd.core import children as rules
from shepherd.core.events import EventKind
from shepherd.core.timing import LATEST_DUE
from shepherd.errors import ConfigError, StaleEpochError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.ops.claims import FinishTask
from shepherd.store.sql.plan import first, one, send

if TYPE_CHECKING:
    from shepherd.store.ops.children import CancelChildren, StartChild, WaitChildren
    from shepherd.store.ops.claims import FailTask
    from shepherd.store.sql.plan import Plan, Writing

__all__ = [
    "cancel_children",
    "cancel_owned",
    "ended_of",
    "resume",
    "start",
    "wait",
]

_HOLD = (
    "SELECT key, reply_to FROM tasks "
    "WHERE id = ? AND lock_epoch = ? AND locked_by = ? AND process_state = 'processing'"
    "{for_update}"
)
_DEPTH = "SELECT depth FROM task_children WHERE child_id = ?"
_BY_KEY = "SELECT id FROM tasks WHERE workflow = ? AND key = ?"
_INSERT = (
    "INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, complete_within, "
    "failure_count, not_before, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, 'pending', 0, ?{float}, 0, ?{ts}, ?{ts}, ?{ts})"
)
_LINK = (
    "INSERT INTO task_children (child_id, parent_id, seq, depth, on_parent_end) "
    "VALUES (?, ?, ?, ?, ?)"
)
_STEP = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, request, result, "
    "started_at, finished_at) VALUES (?, ?, 'child', ?, ?, 1, ?, ?, ?{ts}, ?{ts})"
)
_RELEASE = (
    "UPDATE tasks SET process_state = 'pending', locked_by = NULL, complete_by = NULL, "
    "not_before = ?{ts}, updated_at = ? "
    "WHERE id = ? AND lock_epoch = ? AND locked_by = ? AND process_state = 'processing'"
)
_ENDED_STEP = (
    "SELECT seq FROM steps WHERE task_id = ? AND kind = 'child' AND state <> 'running' "
    "AND seq {list} LIMIT 1"
)
_LINK_OF = "SELECT parent_id, seq, on_parent_end FROM task_children WHERE child_id = ?"
_PARENT = "SELECT key, reply_to, process_state, locked_by FROM tasks WHERE id = ?{for_update}"
_WAKE_PARENT = "UPDATE tasks SET not_before = ?, updated_at = ? WHERE id = ?"
_STEP_ENDS = (
    "UPDATE steps SET state = ?, result = ?, error = ?, finished_at = ? "
    "WHERE task_id = ? AND seq = ? AND kind = 'child' AND state = 'running'"
)
_CHILDREN = (
    "SELECT c.child_id, c.on_parent_end, t.process_state, t.key, t.reply_to "
    "FROM task_children c JOIN tasks t ON t.id = c.child_id WHERE c.parent_id = ?"
)
_CANCEL = (
    "UPDATE tasks SET process_state = 'compensating', cancel_requested = ?, "
    "error = coalesce(error, ?), locked_by = NULL, lock_epoch = lock_epoch + 1, "
    "complete_by = NULL, not_before = ?, updated_at = ? WHERE id = ?"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"
_HOLD_ANY = "SELECT key FROM tasks WHERE id = ? AND lock_epoch = ? AND locked_by = ?{for_update}"


def start(batch: Writing, ops: Sequence[StartChild]) -> Plan[list[object]]:
    """Record each child step, insert its child task and link; park the parent with `wait`."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        text = batch.encode(op.input)
        if isinstance(text, Exception):
            out.append(text)
            continue
        held = yield from first(d.sql(_HOLD), (op.task_id, op.epoch, op.locked_by))
        if held is None:
            out.append(StaleEpochError(op.task_id, op.epoch))
            continue
        key, reply_to = held
        above = yield from first(d.sql(_DEPTH), (op.task_id,))
        depth = (0 if above is None else int(above[0])) + 1
        refused = rules.depth_refused(depth)
        if refused is not None:
            out.append(ConfigError("ctx.run_workflow", refused))
            continue
        if op.key is not None:
            taken = yield from first(d.sql(_BY_KEY), (op.workflow, op.key))
            if taken is not None:
                problem = rules.key_taken(op.workflow, op.key, taken[0])
                out.append(ConfigError("key", problem))
                continue
        child_id = op.child_id
        yield from send(
            d.sql(_INSERT), (child_id, op.workflow, op.key, text, op.complete_within, now, now, now)
        )
        yield from send(d.sql(_LINK), (child_id, op.task_id, op.seq, depth, op.on_parent_end))
        awaited = op.on_parent_end == rules.WAIT
        request = dumps_detail(rules.step_request(op.workflow, child_id, op.on_parent_end))
        state, result = ("running", None) if awaited else ("completed", dumps_detail(child_id))
        finished = None if awaited else now
        yield from send(
            d.sql(_STEP), (op.task_id, op.seq, op.workflow, state, request, result, now, finished)
        )
        received = dumps_detail({"workflow": op.workflow, "parent": op.task_id, "seq": op.seq})
        batch.event(child_id, op.key, None, EventKind.RECEIVED, received)
        started = dumps_detail({"seq": op.seq, "child": child_id, "workflow": op.workflow})
        batch.event(op.task_id, key, reply_to, EventKind.CHILD_STARTED, started)
        if op.wait:
            fence = (op.task_id, op.epoch, op.locked_by)
            yield from send(d.sql(_RELEASE), (d.stored(LATEST_DUE), now, *fence))
            detail = dumps_detail({"seqs": [op.seq]})
            batch.event(op.task_id, key, reply_to, EventKind.WAITING_CHILDREN, detail)
        batch.rings.add(ch.TASKS)
        out.append(child_id)
    return out


def wait(batch: Writing, ops: Sequence[WaitChildren]) -> Plan[list[object]]:
    """Give up each parent's claim until one of the children it waits on ends (fenced)."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        fence = (op.task_id, op.epoch, op.locked_by)
        held = yield from first(d.sql(_HOLD), fence)
        if held is None:
            out.append(StaleEpochError(op.task_id, op.epoch))
            continue
        text, params = d.listed(_ENDED_STEP, list(op.seqs), kind="int")
        ended = yield from first(text, (op.task_id, *params))
        until = now if ended is not None else d.stored(LATEST_DUE)
        yield from send(d.sql(_RELEASE), (until, now, *fence))
        detail = dumps_detail({"seqs": list(op.seqs)})
        batch.event(op.task_id, held[0], held[1], EventKind.WAITING_CHILDREN, detail)
        out.append(None)
    return out


def ended_of(end: FinishTask | FailTask) -> tuple[str, str, Any, Any]:
    """What `resume` needs of a task's end: its id, state, result and error."""
    if isinstance(end, FinishTask):
        return (end.task_id, "processed", end.result, None)
    return (end.task_id, str(end.state), None, end.error)


def resume(batch: Writing, ended: Sequence[tuple[str, str, Any, Any]]) -> Plan[None]:
    """Each child `(id, state, result, error)` ended: its awaited step records it, its parent wakes.

    Run in the child's ending transaction, after its end was written; a child
    with no link, or not awaited, changes nothing here.
    """
    d, now = batch.dialect, batch.now
    for child_id, state, result, error in ended:
        if not rules.resumes(state):
            continue
        link = yield from first(d.sql(_LINK_OF), (child_id,))
        if link is None or link[2] != rules.WAIT:
            continue
        parent_id, seq = link[0], link[1]
        parent = yield from first(d.sql(_PARENT), (parent_id,))
        if parent is None:
            continue
        outcome = rules.step_outcome(child_id, state, result, error)
        yield from send(
            d.sql(_STEP_ENDS),
            (
                outcome.state,
                None if outcome.result is None else batch.dumps(outcome.result),
                None if outcome.error is None else batch.dumps_error(outcome.error),
                now,
                parent_id,
                seq,
            ),
        )
        if parent[2] == "pending" and parent[3] is None:
            yield from send(d.sql(_WAKE_PARENT), (now, now, parent_id))
            batch.rings.add(ch.TASKS)
        detail = dumps_detail({"seq": seq, "child": child_id, "state": state})
        batch.event(parent_id, parent[0], parent[1], EventKind.CHILD_ENDED, detail)


def cancel_children(batch: Writing, parents: Sequence[str], *, everything: bool) -> Plan[list[str]]:
    """Cancel the unended children of `parents` (see the module's docstring), and theirs.

    Returns the ids cancelled, parents before their children.
    """
    d, now = batch.dialect, batch.now
    cancelled: list[str] = []
    todo = [(parent_id, everything) for parent_id in parents]
    while todo:
        parent_id, every = todo.pop(0)
        rows = yield from one(d.sql(_CHILDREN), (parent_id,))
        for child_id, policy, state, key, reply_to in rows:
            if not rules.cancels(policy, state, everything=every):
                continue
            why = dumps_detail({"reason": f"cancelled with its parent {parent_id}"})
            yield from send(d.sql(_CANCEL), (True, why, now, now, child_id))
            yield from send(d.sql(_DROP_REQUESTS), (child_id,))
            detail = dumps_detail({"by": f"parent {parent_id}"})
            batch.event(child_id, key, reply_to, EventKind.CANCEL_REQUESTED, detail)
            cancelled.append(child_id)
            # A cancelled child's own children go with it, whatever their policy said.
            todo.append((child_id, True))
            batch.rings.add(ch.TASKS)
    return cancelled


def cancel_owned(batch: Writing, ops: Sequence[CancelChildren]) -> Plan[list[object]]:
    """`CancelChildren`: fenced by each parent's claim, then `cancel_children`."""
    d = batch.dialect
    out: list[object] = []
    for op in ops:
        held = yield from first(d.sql(_HOLD_ANY), (op.task_id, op.epoch, op.locked_by))
        if held is None:
            out.append(StaleEpochError(op.task_id, op.epoch))
            continue
        out.append((yield from cancel_children(batch, [op.task_id], everything=False)))
    return out
