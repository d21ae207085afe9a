"""Batch handlers for a task's life: submit, claim, finish, fail, compensate, release; task reads.

Each handler gets every operation of its kind in the batch and returns one
outcome per operation, in order (a value, or an exception for that caller).
The owner's ends of a task (`finish`, `fail`, `start_compensation`) write
what `core.effects` makes of them (`effects.UPDATE`), fenced by
`WHERE lock_epoch = ? AND locked_by = ?`; `finish` also checks its tasks'
fencing columns first (`owners`, under the write lock), to write them all at
once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.records import Step, Task
from shepherd.core.states import ProcessState
from shepherd.errors import StaleEpochError
from shepherd.payloads import dumps_detail
from shepherd.store import ops
from shepherd.store import signals as ch
from shepherd.store.contract import Submitted
from shepherd.store.effect_rows import effect_row, owner_alert, owner_effect, plan_finishes
from shepherd.store.ids import new_task_id
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite import retention
from shepherd.store.sqlite.alerts import resolve_alerts, store_alert
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.effects import UPDATE, params, written
from shepherd.store.sqlite.rows import (
    STEP_COLUMNS,
    TASK_COLUMNS,
    StepCol,
    TaskCol,
    chunks,
    owners,
    step_from_row,
    task_from_row,
    ts,
    tuples,
)
from shepherd.store.step_writes import then_holder
from shepherd.store.submits import Plan
from shepherd.store.task_filters import few_ids, ids_probe, list_query

if TYPE_CHECKING:
    import sqlite3
    from datetime import datetime

    from shepherd.store.contract import NewTask
    from shepherd.store.sqlite.batch import EventRow, SqliteBatch

__all__ = [
    "claim",
    "count_tasks",
    "fail",
    "finish",
    "get_task",
    "list_tasks",
    "release",
    "start_compensation",
    "submit",
    "submit_many",
]

_INSERT = (
    "INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, "
    "complete_within, failure_count, not_before, reply_to, created_at, updated_at, trace, "
    "deadline) VALUES (?, ?, ?, ?, 'pending', 0, ?, 0, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_BY_KEY = "SELECT id FROM tasks WHERE workflow = ? AND key = ?"
# Claims, peeks and the next due instant read the claimable tasks by the partial
# index tasks_claimable, in not_before order, up to the limit: SQLite's planner
# took tasks_state and read, then sorted, every pending task (thousands asleep).
_CLAIMING = (
    "UPDATE tasks SET locked_by = ?, lock_epoch = lock_epoch + 1, "
    "complete_by = ? + complete_within, updated_at = ?, "
    "process_state = CASE process_state WHEN 'pending' THEN 'processing' "
    "ELSE process_state END "
    "WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_claimable WHERE locked_by IS NULL "
    "AND process_state IN ('pending', 'compensating') AND not_before <= ?{skipped} "
    f"ORDER BY not_before LIMIT ?) RETURNING {TASK_COLUMNS}"
)
_CLAIM = _CLAIMING.format(skipped="")
# The same, leaving the tasks listed alone (`ClaimTasks.skip`).
_CLAIM_SKIPPING = _CLAIMING.format(skipped=" AND id NOT IN ({marks})")
# (owner, now, now, id, epoch, now): one task peeked at `epoch` claimed, as `_CLAIM` would,
# while it is still pending, unowned, due and at that epoch (`ReplyThen.claim`).
_CLAIM_ONE = (
    "UPDATE tasks SET locked_by = ?, lock_epoch = lock_epoch + 1, "
    "complete_by = ? + complete_within, updated_at = ?, process_state = 'processing' "
    "WHERE id = ? AND lock_epoch = ? AND locked_by IS NULL AND process_state = 'pending' "
    "AND not_before <= ? RETURNING key, reply_to, lock_epoch"
)
# (now, limit): what `_CLAIM` would take first, claiming none.
_PEEK = (
    f"SELECT {TASK_COLUMNS} FROM tasks INDEXED BY tasks_claimable WHERE locked_by IS NULL "
    "AND process_state IN ('pending', 'compensating') AND not_before <= ? "
    "ORDER BY not_before LIMIT ?"
)
# The owner's fence: the task is still held by that owner, at that epoch.
_OWNED = UPDATE + " WHERE id = ? AND lock_epoch = ? AND locked_by = ?"
_OWNED_RETURNING = _OWNED + " RETURNING key, reply_to, workflow, failure_count, alerted"
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"
_RELEASE = (
    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
    "complete_by = NULL, not_before = ?, updated_at = ?, "
    "process_state = CASE process_state WHEN 'processing' THEN 'pending' "
    "ELSE process_state END WHERE locked_by = ? AND id IN ({marks}) RETURNING id"
)
_GET_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"
_STEPS_OF_TASK = f"SELECT {STEP_COLUMNS} FROM steps WHERE task_id = ? ORDER BY seq"
_STEPS_OF = f"SELECT {STEP_COLUMNS} FROM steps WHERE task_id IN ({{marks}}) ORDER BY seq"
_COUNT = "SELECT process_state, count(*) FROM tasks GROUP BY process_state"


@WRITES.handles(ops.SubmitTask)
def submit(batch: SqliteBatch, ops: Sequence[ops.SubmitTask]) -> list[object]:
    """Insert pending tasks; a key already used for the workflow returns that task."""
    tasks = [op.task for op in ops]
    return _insert(batch, tasks, [batch.encode(task.input) for task in tasks])


@WRITES.handles(ops.SubmitTasks)
def submit_many(batch: SqliteBatch, ops: Sequence[ops.SubmitTasks]) -> list[object]:
    """Insert each operation's tasks, all or none, as `submit` inserts one."""
    plan = Plan.of(batch, ops)
    return plan.finish(_insert(batch, plan.tasks, plan.encoded))


def _insert(
    batch: SqliteBatch, tasks: Sequence[NewTask], encoded: Sequence[str | Exception]
) -> list[object]:
    """Insert the tasks whose input encoded (in order); one outcome per task.

    A key already used for the workflow (earlier in this batch too) or whose
    purged task's tombstone remains returns that task; an input that did not
    encode is its task's outcome.
    """
    conn, now = batch.conn, batch.now
    out: list[object] = []
    events: list[EventRow] = []
    for item, text in zip(tasks, encoded, strict=True):
        if isinstance(text, Exception):
            out.append(text)
            continue
        if item.key is not None:
            purged = retention.purged_key(conn, item.workflow, item.key)
            if purged is not None:  # the key's task was purged: it still answers for it
                out.append(Submitted(task_id=purged, created=False))
                continue
        task_id = new_task_id()
        # Due at the batch's instant plus the delay (the store's clock), or when given.
        due = now + item.delay if item.not_before is None else item.not_before.timestamp()
        cursor = conn.execute(
            _INSERT,
            (
                task_id,
                item.workflow,
                item.key,
                text,
                item.complete_within,
                due,
                item.reply_to,
                now,
                now,
                item.trace,
                None if item.deadline is None else due + item.deadline,
            ),
        )
        if cursor.rowcount == 0:
            row = conn.execute(_BY_KEY, (item.workflow, item.key)).fetchone()
            out.append(Submitted(task_id=row["id"], created=False))
            continue
        detail = dumps_detail({"workflow": item.workflow})
        events.append((task_id, item.key, item.reply_to, EventKind.RECEIVED, detail, now))
        out.append(Submitted(task_id=task_id, created=True))
    batch.events(events)
    if events:
        batch.rings.add(ch.TASKS)
    return out


@WRITES.handles(ops.ClaimTasks)
def claim(batch: SqliteBatch, ops: Sequence[ops.ClaimTasks]) -> list[object]:
    """Claim claimable tasks with one conditional UPDATE each (under the write lock)."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        owner, limit = op.locked_by, op.limit
        # Tuples read by position (a hot path): 0 id, 2 key, 8 lock_epoch, 12 not_before,
        # 13 reply_to.
        if op.skip:  # rare: tasks peeked at, not claimed yet
            marks = ",".join("?" * len(op.skip))
            rows = (
                tuples(conn)
                .execute(
                    _CLAIM_SKIPPING.format(marks=marks), (owner, now, now, now, *op.skip, limit)
                )
                .fetchall()
            )
        else:
            rows = tuples(conn).execute(_CLAIM, (owner, now, now, now, limit)).fetchall()
        rows.sort(key=lambda r: r[TaskCol.NOT_BEFORE])  # RETURNING order is unspecified
        # A task claimed for the first time (epoch 1) has no steps yet.
        older = [r[TaskCol.ID] for r in rows if r[TaskCol.LOCK_EPOCH] > 1]
        steps: dict[str, list[Step]] = defaultdict(list)
        for chunk in chunks(older):
            marks = ",".join("?" * len(chunk))
            for s in tuples(conn).execute(_STEPS_OF.format(marks=marks), chunk):
                steps[s[StepCol.TASK_ID]].append(step_from_row(s))
        batch.events(
            [
                (
                    r[TaskCol.ID],
                    r[TaskCol.KEY],
                    r[TaskCol.REPLY_TO],
                    EventKind.CLAIMED,
                    dumps_detail({"owner": owner, "lock_epoch": r[TaskCol.LOCK_EPOCH]}),
                    now,
                )
                for r in rows
            ]
        )
        out.append([task_from_row(r, tuple(steps.get(r[TaskCol.ID], ()))) for r in rows])
    return out


def claim_first(batch: SqliteBatch, ops_: Sequence[ops.ReplyThen]) -> list[bool]:
    """Per `reply_then` operation: whether its task is held for its `then` (claimed now with
    `claim`, as `claim` claims, or held already without)."""
    conn, now = batch.conn, batch.now
    out: list[bool] = []
    for op in ops_:
        if op.claim is None:
            out.append(True)
            continue
        task_id, owner, _ = then_holder(op)
        row = conn.execute(_CLAIM_ONE, (owner, now, now, task_id, op.claim, now)).fetchone()
        out.append(row is not None)
        if row is not None:
            detail = dumps_detail({"owner": owner, "lock_epoch": row[2]})
            batch.events([(task_id, row[0], row[1], EventKind.CLAIMED, detail, now)])
    return out


@WRITES.handles(ops.FinishTask)
def finish(batch: SqliteBatch, ops: Sequence[ops.FinishTask]) -> list[object]:
    """Tasks `processed` with their results (fenced by epoch and owner).

    The alerts of a task that had one resolve with it (`resolve_alerts`).
    """
    conn, now = batch.conn, batch.now
    found = owners(conn, [op.task_id for op in ops])
    out, writes = plan_finishes(ops, found, batch)
    done: dict[str, tuple[object, ...]] = {}
    for row, epoch, owner in writes:
        done[row.task_id] = (*params(row, now), row.task_id, epoch, owner)  # the last one wins
    conn.executemany(_OWNED, done.values())
    batch.events([written(batch, row, *found.meta[row.task_id]) for row, _, _ in writes])
    if found.alerted:
        alerted = found.alerted
        resolve_alerts(batch, [(t, "processed") for t in done if t in alerted])
    return out


@WRITES.handles(ops.FailTask)
def fail(batch: SqliteBatch, ops: Sequence[ops.FailTask]) -> list[object]:
    """Tasks end `error`, `compensated` or `cancelled` (fenced); their requests go.

    A task failed into `error` gets its alert stored with it (`owner_alert`);
    one that had an alert and ends `compensated` or `cancelled` resolves it.
    """
    return _write_owned(batch, ops)


@WRITES.handles(ops.StartCompensation)
def start_compensation(batch: SqliteBatch, ops: Sequence[ops.StartCompensation]) -> list[object]:
    """The owner moves tasks to `compensating`, keeping its claim (fenced)."""
    return _write_owned(batch, ops)


def _write_owned(
    batch: SqliteBatch, ops: Sequence[ops.FailTask | ops.StartCompensation]
) -> list[object]:
    """Write the effect each operation has (`owner_effect`), fenced by its owner and epoch."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    events: list[EventRow] = []
    ended: list[tuple[str, str]] = []
    for op in ops:
        task_id, owner, epoch = op.task_id, op.locked_by, op.epoch
        try:
            row = effect_row(task_id, owner_effect(op), batch)
        except ValueError as exc:  # a state a task cannot fail into
            out.append(exc)
            continue
        cursor = conn.execute(_OWNED_RETURNING, (*params(row, now), task_id, epoch, owner))
        returned = cursor.fetchone()
        if returned is None:
            out.append(StaleEpochError(task_id, epoch))
            continue
        events.append(written(batch, row, returned["key"], returned["reply_to"]))
        alert = owner_alert(op, failure_count=returned["failure_count"])
        if alert is not None:
            store_alert(batch, task_id, returned["workflow"], returned["key"], alert)
        elif returned["alerted"]:
            ended.append((task_id, row.process_state))
        out.append(None)
    batch.events(events)
    resolve_alerts(batch, ended)
    return out


@WRITES.handles(ops.ReleaseTasks)
def release(batch: SqliteBatch, ops: Sequence[ops.ReleaseTasks]) -> list[object]:
    """Give claimed tasks back: unowned, epoch bumped, claimable at once."""
    counts: list[object] = [_release(batch, op.locked_by, list(op.task_ids)) for op in ops]
    if any(counts):
        batch.rings.add(ch.TASKS)
    return counts


def _release(batch: SqliteBatch, owner: str, task_ids: list[str]) -> int:
    """Release those of `task_ids` that `owner` holds, dropping their queued requests; how many."""
    conn, now = batch.conn, batch.now
    count = 0
    for chunk in chunks(task_ids):
        marks = ",".join("?" * len(chunk))
        released = conn.execute(_RELEASE.format(marks=marks), (now, now, owner, *chunk)).fetchall()
        count += len(released)
        # Their queued requests go too: nobody wants those replies any more.
        conn.executemany(_DROP_REQUESTS, [(r["id"],) for r in released])
    return count


# -- reads ---------------------------------------------------------------------
_NEXT_DUE = (
    "SELECT min(not_before) FROM tasks INDEXED BY tasks_claimable "
    "WHERE locked_by IS NULL AND process_state IN ('pending', 'compensating')"
)


@READS.handles(ops.PeekTasks)
def peek(at: Reading, op: ops.PeekTasks) -> list[Task]:
    """The pending tasks a claim would take first, with their steps; none claimed."""
    conn = at.conn
    rows = tuples(conn).execute(_PEEK, (at.now, op.limit)).fetchall()
    older = [r[TaskCol.ID] for r in rows if r[TaskCol.LOCK_EPOCH] > 0]
    steps: dict[str, list[Step]] = defaultdict(list)
    for chunk in chunks(older):
        marks = ",".join("?" * len(chunk))
        for s in tuples(conn).execute(_STEPS_OF.format(marks=marks), chunk):
            steps[s[StepCol.TASK_ID]].append(step_from_row(s))
    return [task_from_row(r, tuple(steps.get(r[TaskCol.ID], ()))) for r in rows]


@READS.handles(ops.NextDue)
def next_due(at: Reading, op: ops.NextDue) -> datetime | None:
    """The earliest not_before of the claimable or soon claimable tasks (index-only)."""
    (due,) = at.conn.execute(_NEXT_DUE).fetchone()
    return None if due is None else unix_instant(due)


@READS.handles(ops.GetTask)
def get_task(at: Reading, op: ops.GetTask) -> Task | None:
    """The task with its steps in order, or None."""
    conn = at.conn
    task_id = op.task_id
    row = conn.execute(_GET_TASK, (task_id,)).fetchone()
    if row is None:
        return None
    steps = conn.execute(_STEPS_OF_TASK, (task_id,)).fetchall()
    return task_from_row(row, tuple(step_from_row(s) for s in steps))


@READS.handles(ops.ListTasks)
def list_tasks(at: Reading, op: ops.ListTasks) -> list[Task]:
    """Tasks matching the operation's filters, newest first."""
    conn = at.conn
    # Without statistics SQLite would take the primary key's range for any id prefix,
    # then sort what it found: all the tasks, for a prefix of a few characters.
    ranged = not op.id_prefix or _few_ids_of(conn, op.id_prefix)
    sql, params = list_query(
        op,
        mark="?",
        columns=TASK_COLUMNS,
        limit=op.limit,
        instant=ts,
        prefix_range=ranged,
        pin=True,
    )
    rows = conn.execute(sql, params).fetchall()
    return [task_from_row(r) for r in rows]


def _few_ids_of(conn: sqlite3.Connection, prefix: str) -> bool:
    """Whether fewer than MANY_IDS task ids start with `prefix` (read in the primary key)."""
    (found,) = conn.execute(*ids_probe(prefix, mark="?")).fetchone()
    return few_ids(found)


@READS.handles(ops.CountTasks)
def count_tasks(at: Reading, op: ops.CountTasks) -> dict[ProcessState, int]:
    """How many tasks are in each state (states without tasks are absent)."""
    conn = at.conn
    return {ProcessState(state): count for state, count in conn.execute(_COUNT).fetchall()}
