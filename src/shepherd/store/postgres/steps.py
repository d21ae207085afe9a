"""Batch handlers for steps: start a step with its request, record agents' replies.

`start_step` is the transactional outbox: the step turns `running` and its
request is queued in the same transaction. It is fenced by the owner's epoch:
the tasks are locked (`FOR UPDATE`, in id order) and checked before anything
is written, as the SQLite store checks them inside its write lock. A step
handed to its key's owner (`OwnerTake`) is taken or queued by the server in
its INSERT itself (`owned_steps.HANDED`, after the key's lock), its outcome
read back with the commit: no round trip of its own.
`record_replies` locks the owner's tasks (`FOR UPDATE OF t`), so a
supervisor's reset cannot slip between reading a reply and recording it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from shepherd.store import signals as ch
from shepherd.store.ops import OwnerTake, RecordReplies, SleepTask, StartStep
from shepherd.store.postgres.batch import WRITES, Later
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.rows import columns, limit_of
from shepherd.store.postgres.tasks import send_lock_owners
from shepherd.store.sql import sleeps
from shepherd.store.sql.dialect import POSTGRES
from shepherd.store.sql.owned_steps import HANDED, handed_params, key_lock
from shepherd.store.step_writes import REPLY_COLUMNS, handed_request, plan_starts, sort_replies
from shepherd.store.wakeups import CHANNELS

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.core.records import Request
    from shepherd.store.contract import StepStart
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.rows import Owners
    from shepherd.store.step_writes import Replies

__all__ = ["TOUCH", "record_replies", "start_step", "start_with", "write_recorded"]

# Rows are found by `= ANY(...)` of their keys, coalesce() keeps the owner's
# index out: see KEYED and UNINDEXED_OWNER in postgres/rows.py. A touch writes no
# indexed column, so it is a HOT update (migration 0032): updated_at is moved by
# changes of state and claim, not by a step's progress.
_TOUCH_CLAIMS = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], "
    "%b::timestamptz[]) AS v(id, lock_epoch, locked_by, complete_by)) "
    "UPDATE tasks t SET complete_by = v.complete_by FROM v "
    "WHERE t.id = ANY(ARRAY(SELECT id FROM v)) AND t.id = v.id "
    "AND t.lock_epoch = v.lock_epoch AND coalesce(t.locked_by, '') = v.locked_by"
)
_DROP_OLD_REQUESTS = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::int[]) AS v(task_id, seq)) "
    "DELETE FROM requests r USING v WHERE r.task_id = ANY(ARRAY(SELECT task_id FROM v)) "
    "AND r.task_id = v.task_id AND r.seq = v.seq"
)
_UPSERT_STEP = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, "
    "request, undo, compensates, resolution, started_at) "
    "VALUES (%b, %b, %b, %b, 'running', %b, %b, %b, %b, %b, %b, %b) "
    "ON CONFLICT (task_id, seq) DO UPDATE SET state = 'running', "
    "attempt = excluded.attempt, complete_by = excluded.complete_by, "
    "agent = excluded.agent, kind = excluded.kind, request = excluded.request, "
    "undo = excluded.undo, compensates = excluded.compensates, "
    "resolution = excluded.resolution, error = NULL, started_at = excluded.started_at"
)
_UPSERT_STEPS = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, "
    "request, undo, compensates, resolution, started_at) "
    "SELECT v.task_id, v.seq, v.kind, v.agent, 'running', v.attempt, v.complete_by, "
    "v.request, v.undo, v.compensates, v.resolution, %b "
    "FROM unnest(%b::text[], %b::int[], %b::text[], %b::text[], %b::int[], "
    "%b::timestamptz[], %b::text[], %b::text[], %b::int[], %b::text[]) "
    "AS v(task_id, seq, kind, agent, attempt, complete_by, request, undo, compensates, "
    "resolution) "
    "ON CONFLICT (task_id, seq) DO UPDATE SET state = 'running', "
    "attempt = excluded.attempt, complete_by = excluded.complete_by, "
    "agent = excluded.agent, kind = excluded.kind, request = excluded.request, "
    "undo = excluded.undo, compensates = excluded.compensates, "
    "resolution = excluded.resolution, error = NULL, started_at = excluded.started_at"
)
_INSERT_REQUESTS = (
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, resolution, trace, owner_key, visible_at, "
    "created_at) SELECT v.agent, v.task_id, v.seq, v.attempt, v.lock_epoch, v.kind, "
    "v.payload, v.complete_by, v.within, v.retry, v.suspect, v.resolution, v.trace, "
    "v.owner_key, %b, %b "
    "FROM unnest(%b::text[], %b::text[], %b::int[], %b::int[], %b::bigint[], %b::text[], "
    "%b::text[], %b::timestamptz[], %b::float8[], %b::text[], %b::int[], %b::text[], "
    "%b::text[], %b::text[]) WITH ORDINALITY AS v(agent, task_id, seq, attempt, lock_epoch, "
    "kind, payload, complete_by, within, retry, suspect, resolution, trace, owner_key, n) "
    "ORDER BY v.n"
)


# A request taken as it is queued: leased to its worker and hidden until complete_by.
_INSERT_TAKEN = (
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, resolution, trace, owner_key, taken_by, "
    "visible_at, created_at) VALUES (%b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, "
    "%b, %b, %b, %b) RETURNING id"
)
# HANDED, telling other processes' owners of a request it queued untaken (NOTIFY is
# sent at the commit): the batch's NOTIFYs went out before its rows are read.
_HANDED = (
    POSTGRES.sql(HANDED)
    + f", CASE WHEN taken_by IS NULL THEN pg_notify('{CHANNELS[ch.CALLS]}', '')::text END"
)
_PAYLOAD = 6
_COMPLETE_BY = 7
_OWNER_KEY = 13
_AGENT = 0
# Each key's transaction-long lock, in the (sorted) order given: see `key_lock`.
_LOCK_KEYS = "SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%b::text[]) AS k"


def key_locks(rows: Sequence[tuple[Any, ...]]) -> list[str]:
    """The lock names of the owner keys of request `rows`, sorted (none for unkeyed ones)."""
    return sorted({key_lock(r[_AGENT], r[_OWNER_KEY]) for r in rows if r[_OWNER_KEY] is not None})


@phased(StartStep)
async def start_step(batch: PostgresBatch, ops: Sequence[StartStep]) -> Second:
    """Mark steps running and enqueue their requests; return each one's complete_by."""
    locked = await send_lock_owners(batch, [op.start.task_id for op in ops])

    async def second() -> list[object]:
        return await start_with(batch, ops, await locked())

    return second


async def start_with(
    batch: PostgresBatch, ops: Sequence[StartStep], owners: Owners
) -> list[object]:
    """`start_step`'s writes, once the owners are locked and read (also for `reply_then`)."""
    now = await batch.clock()  # came back with the owners
    plan = plan_starts(
        (op.start for op in ops),
        owners,
        encode=batch.encode,
        later=lambda seconds: now + timedelta(seconds=seconds),
    )
    if plan.superseded:
        await batch.send(_DROP_OLD_REQUESTS, columns(plan.superseded))
    if plan.claims:
        rows = [(task_id, *fields) for task_id, fields in plan.claims.items()]
        await batch.send(_TOUCH_CLAIMS, columns(rows))
    if plan.steps:
        if len({(task_id, seq) for task_id, seq, *_ in plan.steps}) == len(plan.steps):
            await batch.send(_UPSERT_STEPS, (now, *columns(plan.steps)))
        else:
            # One INSERT may not upsert a row twice: apply duplicates in order.
            params = [(*row, now) for row in plan.steps]
            await batch.conn.cursor().executemany(_UPSERT_STEP, params)
    queued = key_locks(plan.requests)
    owned = [row for _, row, start in plan.handed if isinstance(start.taken_by, OwnerTake)]
    keys = sorted({*queued, *key_locks(owned)}) if owned else queued
    if keys:
        # A key's requests are queued one transaction at a time, so that their ids
        # rise in the order they commit: its owner never sees a later one first.
        await batch.send(_LOCK_KEYS, (keys,))
    if plan.requests:
        await batch.send(_INSERT_REQUESTS, (now, now, *columns(plan.requests)))
        batch.rings.add(ch.REQUESTS)
        if queued:
            batch.rings.add(ch.CALLS)  # a key's owner looks at its key's calls and steps
    out: list[object] = [*plan.out]
    for index, row, start in plan.handed:
        taker = start.taken_by
        # Its id is read after the commit, which brings it back: no round trip of its own.
        if isinstance(taker, OwnerTake):  # taken only behind the owner's fence
            sent = await batch.send(_HANDED, handed_params(row, taker, now))
            out[index] = Later(partial(_owned, sent, batch.rings, start, row, now))
            continue
        taken = (*row, taker, row[_COMPLETE_BY], now)
        out[index] = Later(
            partial(_handed, await batch.send(_INSERT_TAKEN, taken), start, row, now)
        )
    return out


async def _handed(
    cursor: AsyncCursor[TupleRow], start: StepStart, row: tuple[Any, ...], now: datetime
) -> Request:
    """The request `_INSERT_TAKEN` queued (taken at once by `start.taken_by`), from its id."""
    inserted = await cursor.fetchone()
    assert inserted is not None, "INSERT ... RETURNING returned no row"
    return handed_request(
        start, inserted[0], complete_by=row[_COMPLETE_BY], payload=row[_PAYLOAD], created_at=now
    )


async def _owned(
    cursor: AsyncCursor[TupleRow],
    rings: set[str],
    start: StepStart,
    row: tuple[Any, ...],
    now: datetime,
) -> Request | datetime:
    """The request `_HANDED` queued: taken by the owner's worker, or (its fence did not
    hold) queued, when this process's owners are woken too (`rings`, rung after this)."""
    inserted = await cursor.fetchone()
    assert inserted is not None, "INSERT ... RETURNING returned no row"
    request_id, taken, _ = inserted
    if taken is None:
        rings.update((ch.REQUESTS, ch.CALLS))
        complete_by: datetime = row[_COMPLETE_BY]
        return complete_by
    return handed_request(
        start, request_id, complete_by=row[_COMPLETE_BY], payload=row[_PAYLOAD], created_at=now
    )


# -- replies -------------------------------------------------------------------
# coalesce(): see UNINDEXED_OWNER in postgres/rows.py.
_TAKE_REPLIES = (
    f"SELECT {REPLY_COLUMNS} FROM replies r JOIN tasks t ON t.id = r.task_id "
    "LEFT JOIN steps s ON s.task_id = r.task_id AND s.seq = r.seq "
    "WHERE coalesce(t.locked_by, '') = %b ORDER BY r.id LIMIT %b FOR UPDATE OF t"
)
# The reply's body becomes the step's result (completed) or error (failed).
_RECORD = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::int[], %b::text[]) "
    "AS v(task_id, seq, body)) "
    "UPDATE steps s SET state = %b, {column} = v.body, finished_at = %b FROM v "
    "WHERE s.task_id = ANY(ARRAY(SELECT task_id FROM v)) AND s.task_id = v.task_id "
    "AND s.seq = v.seq"
)
_COMPLETED = _RECORD.format(column="result")
_FAILED = _RECORD.format(column="error")
_COMPENSATED = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::int[]) AS v(task_id, seq)) "
    "UPDATE steps s SET state = 'compensated' FROM v "
    "WHERE s.task_id = ANY(ARRAY(SELECT task_id FROM v)) AND s.task_id = v.task_id "
    "AND s.seq = v.seq"
)
TOUCH = (
    "UPDATE tasks SET complete_by = %b + complete_within * interval '1 second' "
    "WHERE id = ANY(%b::text[])"
)
_DROP_REPLIES = "DELETE FROM replies WHERE id = ANY(%b::bigint[])"


def _last_per_step(rows: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """One row per (task_id, seq), the last one: as if applied one by one."""
    return list({(task_id, seq): (task_id, seq, body) for task_id, seq, body in rows}.values())


@phased(RecordReplies)
async def record_replies(batch: PostgresBatch, ops: Sequence[RecordReplies]) -> Second:
    """Take the owner's replies; record those for the current epoch and attempt.

    Every operation's replies are asked for at once, then read, when each has
    its own owner; two of one owner take one after the other (the second takes
    what the first left).
    """
    take = (_TAKE_REPLIES, [(op.locked_by, limit_of(op.limit)) for op in ops])
    at_once = len({op.locked_by for op in ops}) == len(ops)
    sent = [await batch.send(take[0], params) for params in take[1]] if at_once else []

    async def second() -> list[object]:
        out: list[object] = []
        for i, params in enumerate(take[1]):
            cursor = sent[i] if at_once else await batch.send(take[0], params)
            replies = sort_replies(await cursor.fetchall())
            await batch.clock()  # came back with the replies
            await write_recorded(batch, replies)
            if replies.ids:
                await batch.send(_DROP_REPLIES, (replies.ids,))
            out.append(replies.taken)
        return out

    return second


async def write_recorded(batch: PostgresBatch, replies: Replies) -> None:
    """Record replies on their steps: results, errors, undone steps, claims, events."""
    now = batch.now
    if replies.completed:
        completed = columns(_last_per_step(replies.completed))
        await batch.send(_COMPLETED, (*completed, "completed", now))
    if replies.failed:
        failed = columns(_last_per_step(replies.failed))
        await batch.send(_FAILED, (*failed, "failed", now))
    if replies.compensated:
        await batch.send(_COMPENSATED, columns(set(replies.compensated)))
    if replies.touched:
        await batch.send(TOUCH, (now, replies.touched))
    for event in replies.events:
        batch.event(*event)


@WRITES.handles(SleepTask)
async def sleep(batch: PostgresBatch, ops: Sequence[SleepTask]) -> list[object]:
    """Record sleep steps and give up their tasks' claims until the wake-up (fenced)."""
    return await batch.run(sleeps.sleep(batch, ops))
