"""Batch handlers for a task's life: submit, claim, finish, fail, compensate, release.

Each handler gets every operation of its kind in the batch and returns one
outcome per operation, in order (a value, or an exception for that caller).
Statements are queued in pipeline mode and their results read afterwards, so
each step below costs one round trip however many operations there are. The
owner's ends of a task (`finish`, `fail`, `start_compensation`) write what
`core.effects` makes of them (`effects.UPDATE`), fenced by `(lock_epoch,
locked_by)`: `finish` locks its tasks and checks them first (`send_lock_owners`),
then writes them all in one `effects.UPDATE_EACH`; `fail` and
`start_compensation` update `WHERE lock_epoch = %s AND locked_by = %s`,
exactly as the SQLite store decides them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

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
from shepherd.store.postgres import inserts
from shepherd.store.postgres.alerts import resolve_alerts, store_alert
from shepherd.store.postgres.batch import ALONE, INSTANT, WRITES, Alone
from shepherd.store.postgres.effects import UPDATE, UPDATE_EACH, params, params_each, written
from shepherd.store.postgres.listener import notifications
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import (
    OWNER_COLUMNS,
    STEP_COLUMNS_S,
    TASK_COLUMNS,
    TASK_COLUMNS_T,
    TASK_WIDTH,
    TaskCol,
    limit_of,
    step_from_row,
    task_from_row,
    utc,
)
from shepherd.store.rows import Owners
from shepherd.store.step_writes import then_holder
from shepherd.store.submits import Plan
from shepherd.store.task_filters import few_ids, ids_probe, list_query

if TYPE_CHECKING:
    from datetime import datetime

    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.store.effect_rows import EffectRow
    from shepherd.store.encoding import Encoding
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = [
    "claim",
    "fail",
    "finish",
    "release",
    "send_lock_owners",
    "start_compensation",
    "submit",
    "submit_many",
]

#: What a submit rings locally (and NOTIFYs): new work, and the `received` event.
_SUBMIT_RINGS = frozenset({ch.TASKS, ch.EVENTS})
_SUBMIT_NOTIFY = notifications(_SUBMIT_RINGS)
# A lone submit without a key, whole in one statement with scalar parameters:
# the task, its `received` event, the NOTIFYs, and the transaction's now().
_SUBMIT_ALONE = (
    "WITH task AS (INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, "
    "complete_within, failure_count, not_before, reply_to, created_at, updated_at, trace) "
    "VALUES (%b::text, %b::text, NULL, %b::text, 'pending', 0, %b::float8, 0, "
    f"{INSTANT}, %b::text, {INSTANT}, {INSTANT}, %b::text) RETURNING id), "
    "received AS (INSERT INTO events (task_id, key, reply_to, kind, detail, at) "
    f"SELECT id, NULL, %b::text, %b::text, %b::text, {INSTANT} FROM task) "
    "SELECT now()" + ", pg_notify(%b::text, %b::text)" * len(_SUBMIT_NOTIFY)
)
# The ids are locked in an ARRAY(...) sub-select, run once (see queues._TAKE).
# The batch's instant in SQL (`INSTANT`): a claim need not wait for the clock.
_CLAIM = (
    "UPDATE tasks t SET locked_by = %b, lock_epoch = t.lock_epoch + 1, "
    f"complete_by = {INSTANT} + t.complete_within * interval '1 second', "
    f"updated_at = {INSTANT}, "
    "process_state = CASE t.process_state WHEN 'pending' THEN 'processing' "
    "ELSE t.process_state END "
    "WHERE t.id = ANY(ARRAY(SELECT id FROM tasks WHERE locked_by IS NULL "
    f"AND process_state IN ('pending', 'compensating') AND not_before <= {INSTANT} "
    "AND id <> ALL(%b::text[]) ORDER BY not_before LIMIT %b FOR UPDATE SKIP LOCKED)) "
    f"RETURNING {TASK_COLUMNS_T}"
)
# The claim and the steps of the tasks it claimed, in one statement: one row per
# step (a task without steps, as one claimed for the first time, has one row of
# NULL step columns). The steps are read in the claim's snapshot, which no claim changes.
_CLAIM_WITH_STEPS = (
    f"WITH c AS ({_CLAIM}) SELECT c.*, {STEP_COLUMNS_S} FROM c "
    "LEFT JOIN steps s ON c.lock_epoch > 1 AND s.task_id = c.id ORDER BY c.id, s.seq"
)
# One task peeked at an epoch claimed, as `_CLAIM` would, while it is still pending,
# unowned, due and at that epoch (`ReplyThen.claim`).
_CLAIM_ONE = (
    "UPDATE tasks SET locked_by = %b, lock_epoch = lock_epoch + 1, "
    f"complete_by = {INSTANT} + complete_within * interval '1 second', "
    f"updated_at = {INSTANT}, process_state = 'processing' "
    "WHERE id = %b AND lock_epoch = %b AND locked_by IS NULL AND process_state = 'pending' "
    f"AND not_before <= {INSTANT} RETURNING key, reply_to, lock_epoch"
)
# What `_CLAIM` would take first, claiming none; with their steps.
_PEEK = (
    f"WITH c AS (SELECT {TASK_COLUMNS} FROM tasks WHERE locked_by IS NULL "
    "AND process_state IN ('pending', 'compensating') AND not_before <= coalesce(%s::timestamptz, now()) "
    "ORDER BY not_before LIMIT %s) "
    f"SELECT c.*, {STEP_COLUMNS_S} FROM c "
    "LEFT JOIN steps s ON c.lock_epoch > 0 AND s.task_id = c.id ORDER BY c.not_before, c.id, s.seq"
)
# Ordered by id so that concurrent batches lock shared tasks in the same order.
_LOCK_OWNERS = (
    f"SELECT {OWNER_COLUMNS} FROM tasks WHERE id = ANY(%b::text[]) ORDER BY id FOR UPDATE"
)
# The owner's fence: the task is still held by that owner, at that epoch.
# coalesce(): see UNINDEXED_OWNER in postgres/rows.py.
_OWNED = (
    UPDATE + " WHERE id = %s AND lock_epoch = %s AND coalesce(locked_by, '') = %s "
    "RETURNING key, reply_to, workflow, failure_count, alerted"
)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ANY(%b::text[])"
_RELEASE = (
    "WITH released AS (UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
    "complete_by = NULL, not_before = %b, updated_at = %b, "
    "process_state = CASE process_state WHEN 'processing' THEN 'pending' "
    "ELSE process_state END "
    "WHERE coalesce(locked_by, '') = %b AND id = ANY(%b::text[]) RETURNING id), "
    "dropped AS (DELETE FROM requests WHERE task_id IN (SELECT id FROM released)) "
    "SELECT count(*) FROM released"
)


async def send_lock_owners(
    batch: PostgresBatch, task_ids: Sequence[str]
) -> Callable[[], Awaitable[Owners]]:
    """Lock the tasks (`FOR UPDATE`, in id order); what reads their fencing columns later.

    Every operation of the kind is then checked against the same state, and
    no other transaction can move an epoch before this one commits. The rows
    are read in the handler's second phase (`phases`).
    """
    cursor = await batch.send(_LOCK_OWNERS, (list(dict.fromkeys(task_ids)),))

    async def read() -> Owners:
        found = Owners()
        found.add(await cursor.fetchall())
        return found

    return read


@phased(ops.SubmitTask)
async def submit(batch: PostgresBatch, ops: Sequence[ops.SubmitTask]) -> Second:
    """Insert pending tasks; a key already used for the workflow returns that task."""
    tasks = [op.task for op in ops]
    return await inserts.insert(batch, tasks, [batch.encode(task.input) for task in tasks])


def submit_alone(op: ops.SubmitTask, encoding: Encoding, instant: datetime | None) -> Alone | None:
    """A lone keyless submit as one statement (`ALONE`); None for one with a key, a delay or a deadline.

    A key needs the batch's reads (the task the key already names, a purged
    key's tombstone); an input that does not encode fails in the batch as usual.
    """
    task = op.task
    if task.key is not None or task.timed:  # a delay or a deadline: the batch's insert
        return None
    encoded = encoding.encode(task.input)
    if isinstance(encoded, Exception):
        return None
    task_id = new_task_id()
    detail = dumps_detail({"workflow": task.workflow})
    params = (
        task_id,
        task.workflow,
        encoded,
        float(task.complete_within),
        instant,
        task.reply_to,
        instant,
        instant,
        task.trace,
        task.reply_to,
        str(EventKind.RECEIVED),
        detail,
        instant,
        *(part for pair in _SUBMIT_NOTIFY for part in pair),
    )
    return Alone(_SUBMIT_ALONE, params, Submitted(task_id=task_id, created=True), _SUBMIT_RINGS)


ALONE[ops.SubmitTask] = submit_alone


@phased(ops.SubmitTasks)
async def submit_many(batch: PostgresBatch, ops: Sequence[ops.SubmitTasks]) -> Second:
    """Insert each operation's tasks, all or none, as `submit` inserts one."""
    plan = Plan.of(batch, ops)
    inserted = await inserts.insert(batch, plan.tasks, plan.encoded)

    async def second() -> list[object]:
        return plan.finish(await inserted())

    return second


@phased(ops.ClaimTasks)
async def claim(batch: PostgresBatch, ops: Sequence[ops.ClaimTasks]) -> Second:
    """Claim claimable tasks with FOR UPDATE SKIP LOCKED: concurrent claimers never meet.

    Each claim is one statement that also returns the steps of the tasks it
    claimed (`_CLAIM_WITH_STEPS`): all are sent, then all are read.
    """
    now = batch.instant
    cursors = [
        await batch.send(
            _CLAIM_WITH_STEPS, (op.locked_by, now, now, now, list(op.skip), limit_of(op.limit))
        )
        for op in ops
    ]

    async def second() -> list[object]:
        out: list[object] = []
        for op, cursor in zip(ops, cursors, strict=True):
            tasks: dict[str, tuple[Any, ...]] = {}
            steps: dict[str, list[Step]] = defaultdict(list)
            for r in await cursor.fetchall():
                task_id = r[TaskCol.ID]
                tasks.setdefault(task_id, r[:TASK_WIDTH])
                if r[TASK_WIDTH] is not None:
                    steps[task_id].append(step_from_row(r[TASK_WIDTH:]))
            rows = sorted(tasks.values(), key=lambda r: r[TaskCol.NOT_BEFORE])
            for r in rows:
                detail = dumps_detail({"owner": op.locked_by, "lock_epoch": r[TaskCol.LOCK_EPOCH]})
                batch.event(
                    r[TaskCol.ID], r[TaskCol.KEY], r[TaskCol.REPLY_TO], EventKind.CLAIMED, detail
                )
            out.append([task_from_row(r, tuple(steps.get(r[TaskCol.ID], ()))) for r in rows])
        return out

    return second


async def send_claims_first(
    batch: PostgresBatch, ops_: Sequence[ops.ReplyThen]
) -> Callable[[], Awaitable[list[bool]]]:
    """Claim the tasks of the `reply_then` operations that claim theirs (`claim`), sent before
    anything else of the batch locks them; what reads, per operation, whether its task is held."""
    now = batch.instant
    sent: list[tuple[AsyncCursor[TupleRow], str, str] | None] = []
    for op in ops_:
        if op.claim is None:
            sent.append(None)
            continue
        task_id, owner, _ = then_holder(op)
        cursor = await batch.send(_CLAIM_ONE, (owner, now, now, task_id, op.claim, now))
        sent.append((cursor, task_id, owner))

    async def read() -> list[bool]:
        out = []
        for claim in sent:
            if claim is None:
                out.append(True)
                continue
            cursor, task_id, owner = claim
            row = await cursor.fetchone()
            out.append(row is not None)
            if row is not None:
                detail = dumps_detail({"owner": owner, "lock_epoch": row[2]})
                batch.event(task_id, row[0], row[1], EventKind.CLAIMED, detail)
        return out

    return read


@phased(ops.FinishTask)
async def finish(batch: PostgresBatch, ops: Sequence[ops.FinishTask]) -> Second:
    """Tasks `processed` with their results (fenced by epoch and owner).

    The alerts of a task that had one resolve with it (`resolve_alerts`).
    """
    locked = await send_lock_owners(batch, [op.task_id for op in ops])

    async def second() -> list[object]:
        return await finish_with(batch, ops, await locked())

    return second


async def finish_with(
    batch: PostgresBatch, ops: Sequence[ops.FinishTask], owners: Owners
) -> list[object]:
    """`finish`'s writes, once the owners are locked and read (also for `reply_then`)."""
    now = await batch.clock()  # came back with the owners
    out, writes = plan_finishes(ops, owners, batch)
    done: dict[str, tuple[EffectRow, int, str]] = {}
    for row, epoch, owner in writes:
        written(batch, row, *owners.meta[row.task_id])
        done[row.task_id] = (row, epoch, owner)  # the last one wins, as one by one
    if done:
        await batch.send(UPDATE_EACH, params_each(done.values(), now))
    if owners.alerted:
        alerted = owners.alerted
        await resolve_alerts(batch, [(t, "processed") for t in done if t in alerted])
    return out


@WRITES.handles(ops.FailTask)
async def fail(batch: PostgresBatch, ops: Sequence[ops.FailTask]) -> list[object]:
    """Tasks end `error`, `compensated` or `cancelled` (fenced); their requests go.

    A task failed into `error` gets its alert stored with it (`owner_alert`);
    one that had an alert and ends `compensated` or `cancelled` resolves it.
    """
    return await write_owned(batch, ops)


@WRITES.handles(ops.StartCompensation)
async def start_compensation(
    batch: PostgresBatch, ops: Sequence[ops.StartCompensation]
) -> list[object]:
    """The owner moves tasks to `compensating`, keeping its claim (fenced)."""
    return await write_owned(batch, ops)


async def write_owned(
    batch: PostgresBatch, ops: Sequence[ops.FailTask | ops.StartCompensation]
) -> list[object]:
    """Write the effect each operation has (`owner_effect`), fenced by its owner and epoch.

    All are sent, then all are read; the requests of the tasks changed go at once.
    """
    out: list[object] = [None] * len(ops)
    sent = []
    for i, op in enumerate(ops):
        try:
            row = effect_row(op.task_id, owner_effect(op), batch)
        except ValueError as exc:  # a state a task cannot fail into
            out[i] = exc
            continue
        fence = (op.task_id, op.epoch, op.locked_by)
        sent.append((i, op, row, await batch.send(_OWNED, (*params(row, batch.now), *fence))))
    dropped: list[str] = []
    ended: list[tuple[str, str]] = []
    for i, op, row, cursor in sent:
        found = await cursor.fetchone()
        if found is None:
            out[i] = StaleEpochError(op.task_id, op.epoch)
            continue
        key, reply_to, workflow, failure_count, alerted = found
        written(batch, row, key, reply_to)
        alert = owner_alert(op, failure_count=failure_count)
        if alert is not None:
            await store_alert(batch, op.task_id, workflow, key, alert)
        elif alerted:
            ended.append((op.task_id, row.process_state))
        if row.drop_requests:
            dropped.append(op.task_id)
    if dropped:
        await batch.send(_DROP_REQUESTS, (dropped,))
    await resolve_alerts(batch, ended)
    return out


@WRITES.handles(ops.ReleaseTasks)
async def release(batch: PostgresBatch, ops: Sequence[ops.ReleaseTasks]) -> list[object]:
    """Give claimed tasks back: unowned, epoch bumped, claimable at once."""
    now = batch.now
    cursors = [
        await batch.send(_RELEASE, (now, now, op.locked_by, list(op.task_ids))) for op in ops
    ]
    out: list[object] = []
    for cursor in cursors:
        row = await cursor.fetchone()
        count = 0 if row is None else int(*row)
        if count:
            batch.rings.add(ch.TASKS)
        out.append(count)
    return out


# -- reads ---------------------------------------------------------------------
_GET_TASK = (
    f"SELECT {TASK_COLUMNS_T}, {STEP_COLUMNS_S} FROM tasks t "
    "LEFT JOIN steps s ON s.task_id = t.id WHERE t.id = %s ORDER BY s.seq"
)
_COUNT = "SELECT process_state, count(*) FROM tasks GROUP BY process_state"


_NEXT_DUE = (
    "SELECT min(not_before) FROM tasks "
    "WHERE locked_by IS NULL AND process_state IN ('pending', 'compensating')"
)


@READS.handles(ops.PeekTasks)
async def peek(reader: Reader, op: ops.PeekTasks) -> list[Task]:
    """The pending tasks a claim would take first, with their steps; none claimed."""
    tasks: dict[str, tuple[Any, ...]] = {}
    steps: dict[str, list[Step]] = defaultdict(list)
    for r in await reader.fetch(_PEEK, (reader.clock_param(), limit_of(op.limit))):
        task_id = r[TaskCol.ID]
        tasks.setdefault(task_id, r[:TASK_WIDTH])
        if r[TASK_WIDTH] is not None:
            steps[task_id].append(step_from_row(r[TASK_WIDTH:]))
    return [task_from_row(r, tuple(steps.get(t, ()))) for t, r in tasks.items()]


@READS.handles(ops.NextDue)
async def next_due(reader: Reader, op: ops.NextDue) -> datetime | None:
    """The earliest not_before of the claimable or soon claimable tasks (index-only)."""
    (due,) = (await reader.fetch(_NEXT_DUE))[0]
    return None if due is None else utc(due)


@READS.handles(ops.GetTask)
async def get_task(reader: Reader, op: ops.GetTask) -> Task | None:
    """The task with its steps in order, or None."""
    rows = await reader.fetch(_GET_TASK, (op.task_id,))
    if not rows:
        return None
    found = tuple(step_from_row(r[TASK_WIDTH:]) for r in rows if r[TASK_WIDTH] is not None)
    return task_from_row(rows[0][:TASK_WIDTH], found)


@READS.handles(ops.ListTasks)
async def list_tasks(reader: Reader, op: ops.ListTasks) -> list[Task]:
    """Tasks matching the operation's filters, newest first."""
    # A prepared statement's generic plan takes the primary key's range for any id
    # prefix, then sorts what it found: all the tasks, for a prefix of a few characters.
    ranged = not op.id_prefix or await _few_ids_of(reader, op.id_prefix)
    sql, params = list_query(
        op, mark="%s", columns=TASK_COLUMNS, limit=limit_of(op.limit), prefix_range=ranged
    )
    rows = await reader.fetch(sql, params)
    return [task_from_row(r) for r in rows]


async def _few_ids_of(reader: Reader, prefix: str) -> bool:
    """Whether fewer than MANY_IDS task ids start with `prefix` (read in the primary key)."""
    ((found,),) = await reader.fetch(*ids_probe(prefix, mark="%s"))
    return few_ids(found)


@READS.handles(ops.CountTasks)
async def count_tasks(reader: Reader, op: ops.CountTasks) -> dict[ProcessState, int]:
    """How many tasks are in each state (states without tasks are absent)."""
    return {ProcessState(state): int(n) for state, n in await reader.fetch(_COUNT)}
