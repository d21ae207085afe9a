"""Batch handlers for the agents' request queue and the reply queue.

Requests are leased with FOR UPDATE SKIP LOCKED: workers in many processes
never take the same request at once. A reply is written and its request
removed in one transaction; a request that was superseded or expired is not
replied to.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shepherd.core.records import Event
from shepherd.store import signals as ch
from shepherd.store.ops import (
    EndChild,
    FailTask,
    FinishTask,
    Note,
    ReadEvents,
    ReplyAndAck,
    ReplyThen,
    SleepTask,
    StartChild,
    StartCompensation,
    StartStep,
    TakeRequests,
    TaskEvents,
    WaitChildren,
    WaitSignal,
    Went,
)
from shepherd.store.postgres import slots
from shepherd.store.postgres.batch import INSTANT, WRITES, Later
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.reader import READS, read
from shepherd.store.postgres.rows import (
    REQUEST_COLUMNS_R,
    columns,
    event_from_row,
    limit_of,
    request_from_row,
)
from shepherd.store.postgres.steps import TOUCH, start_with, write_recorded
from shepherd.store.postgres.tasks import (
    finish_with,
    send_claims_first,
    send_lock_owners,
    write_owned,
)
from shepherd.store.rows import EVENT_COLUMNS, Owners, RequestCol
from shepherd.store.sql import owned_steps, queues, signalling, sleeps
from shepherd.store.sql.dialect import POSTGRES
from shepherd.store.step_writes import (
    STEP_OWNER_COLUMNS,
    StepOwnerCol,
    encoded_answers,
    go_on,
    plan_answers,
    stale_then,
)

if TYPE_CHECKING:
    from shepherd.core.records import Reply
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["reply", "take"]

#: The `then`s of a `reply_then` that give up the claim or end a child, each by its handler.
_PARKS = (SleepTask, StartChild, WaitChildren, EndChild)

# (worker, now, now, agents, now, now, agents, now, now, suspects, limit): requests of healthy
# tasks, and at most `suspects` of suspect ones (tasks that crashed a process before).
# The ids are locked in an ARRAY(...) sub-select, run once: as a join, a
# planner trusting statistics taken while the queue was empty would run the
# locking sub-select again for every row (seconds for a few thousand requests).
# The batch's instant in SQL (`INSTANT`): a take need not wait for the clock.
# A suspect's window starts when it is taken (it waited in line to run apart):
# its complete_by moves to now + within in the take itself, so that no instant
# passes with the suspect taken and its probation's deadline behind it.
_STARTS = (
    f"CASE WHEN r.suspect = 1 AND r.within IS NOT NULL THEN {INSTANT} "
    "+ r.within * interval '1 second' ELSE r.complete_by END"
)
_TAKE = (
    f"UPDATE requests r SET taken_by = %b, complete_by = {_STARTS}, visible_at = {_STARTS} "
    "WHERE r.id = ANY(ARRAY(SELECT id FROM requests WHERE agent = ANY(%b::text[]) "
    f"AND visible_at <= {INSTANT} AND complete_by > {INSTANT} AND owner_key IS NULL "
    "AND (suspect = 0 OR id IN "
    "(SELECT id FROM requests WHERE agent = ANY(%b::text[]) AND suspect = 1 "
    f"AND visible_at <= {INSTANT} AND complete_by > {INSTANT} ORDER BY id LIMIT %b)) "
    "ORDER BY id LIMIT %b FOR UPDATE SKIP LOCKED)) "
    f"RETURNING {REQUEST_COLUMNS_R}"
)
# By `= ANY(...)`, and coalesce(): see KEYED and UNINDEXED_OWNER in postgres/rows.py.
# The request replied to, by its id, its lease, and its step and attempt.
_ACK = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::bigint[], %b::text[], %b::text[], "
    "%b::int[], %b::int[]) AS v(id, taken_by, task_id, seq, attempt)) "
    "DELETE FROM requests r USING v WHERE r.id = ANY(ARRAY(SELECT id FROM v)) AND r.id = v.id "
    "AND coalesce(r.taken_by, '') = v.taken_by AND r.task_id = v.task_id AND r.seq = v.seq "
    f"AND r.attempt = v.attempt AND r.complete_by > {INSTANT} "
    "RETURNING r.id, r.taken_by"
)
# The tasks (locked FOR UPDATE, in id order, before their requests are removed)
# and steps of replies a local scheduler may record at once.
_LOCK_STEP_OWNERS = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::int[]) AS v(task_id, seq)) "
    f"SELECT {STEP_OWNER_COLUMNS} FROM tasks t JOIN v ON v.task_id = t.id "
    "JOIN steps s ON s.task_id = v.task_id AND s.seq = v.seq "
    "WHERE t.id = ANY(ARRAY(SELECT task_id FROM v)) ORDER BY t.id FOR UPDATE OF t"
)
_INSERT_REPLIES = (
    "INSERT INTO replies (task_id, seq, attempt, lock_epoch, ok, body, trace, created_at) "
    "SELECT v.task_id, v.seq, v.attempt, v.lock_epoch, v.ok, v.body, v.trace, %b "
    "FROM unnest(%b::text[], %b::int[], %b::int[], %b::bigint[], %b::bool[], %b::text[], "
    "%b::text[]) WITH ORDINALITY AS v(task_id, seq, attempt, lock_epoch, ok, body, trace, n) "
    "ORDER BY v.n"
)


@phased(TakeRequests)
async def take(batch: PostgresBatch, ops: Sequence[TakeRequests]) -> Second:
    """Lease visible, unexpired requests until their complete_by.

    At most `suspects` of each take are requests of suspect tasks, so that an
    agent worker runs a suspect only apart from other suspects.
    """
    now = batch.instant
    cursors = []
    for op in ops:
        agents, worker, limit, suspects = op.agents, op.worker, op.limit, op.suspects
        names = list(agents)
        params = (
            worker,
            now,
            now,
            names,
            now,
            now,
            names,
            now,
            now,
            max(suspects, 0),
            limit_of(limit),
        )
        cursors.append(await batch.send(_TAKE, params))

    async def second() -> list[object]:
        out: list[object] = []
        for cursor in cursors:
            rows = await cursor.fetchall()
            rows.sort(key=lambda r: r[RequestCol.ID])  # RETURNING order is unspecified
            out.append([request_from_row(r) for r in rows])
        return out

    return second


@dataclass(slots=True)
class _Held:
    """What `reply` shares with `reply_then` in one transaction.

    Attributes:
        spare: Tasks whose `then` moves their claim itself (a step's start, an
            end): their replies' touch is held back, and written only if the
            `then` did not go (`withheld`).
        rows: The rows of STEP_OWNER_COLUMNS that `reply` locked and read.
        withheld: The touches held back.
    """

    spare: frozenset[str] = frozenset()
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)

    def owners(self) -> Owners:
        """The locked tasks as `send_lock_owners` reads them (no second lock, no round trip)."""
        found = Owners()
        found.add(
            (
                row[StepOwnerCol.TASK_ID],
                row[StepOwnerCol.LOCK_EPOCH],
                row[StepOwnerCol.LOCKED_BY],
                row[StepOwnerCol.KEY],
                row[StepOwnerCol.REPLY_TO],
                row[StepOwnerCol.ALERTED],
            )
            for row in self.rows
        )
        return found


@phased(ReplyAndAck)
async def reply(batch: PostgresBatch, ops: Sequence[ReplyAndAck]) -> Second:
    """Remove requests and answer them: queue each reply, or record it for a local scheduler.

    False where the request moved on. The capacity slots the handlings held are
    given back in the same transaction.
    """
    return await _reply(batch, ops, _Held())


async def _reply(batch: PostgresBatch, ops: Sequence[ReplyAndAck], held: _Held) -> Second:
    local = [(op.request.task_id, op.request.seq) for op in ops if op.recorder is not None]
    owners = await batch.send(_LOCK_STEP_OWNERS, columns(local)) if local else None
    cursor = await batch.send(
        _ACK,
        (
            [op.request.id for op in ops],
            [op.worker for op in ops],
            [op.request.task_id for op in ops],
            [op.request.seq for op in ops],
            [op.request.attempt for op in ops],
            batch.instant,
        ),
    )

    async def second() -> list[object]:
        steps = {}
        if owners is not None:
            held.rows = await owners.fetchall()
            for row in held.rows:
                steps[row[StepOwnerCol.TASK_ID], row[StepOwnerCol.SEQ]] = row
        # (request id, taken_by) of the requests removed.
        removed = set(await cursor.fetchall())
        now = await batch.clock()  # came back with the removed requests
        acked = [(op.request.id, op.worker) in removed for op in ops]
        plan = plan_answers(encoded_answers(ops, batch), acked, steps)
        await slots.release(batch, [op.slot for op in ops if op.slot is not None])
        if plan.queued:
            await batch.send(_INSERT_REPLIES, (now, *columns(plan.queued)))
            batch.rings.add(ch.REPLIES)
        recorded = plan.recorded
        if held.spare and recorded.touched:
            held.withheld = [t for t in recorded.touched if t in held.spare]
            recorded.touched = [t for t in recorded.touched if t not in held.spare]
        await write_recorded(batch, recorded)
        return list(plan.out)

    return second


@phased(ReplyThen)
async def reply_then(batch: PostgresBatch, ops: Sequence[ReplyThen]) -> Second:
    """Record replies made here; write each operation's `then` if its replies all counted.

    The first phase sends the claims of the operations that claim their task,
    what `reply_and_ack` sends for every reply, and locks the tasks of the
    `then`s; the second records the replies, then writes the
    `then`s that go (starts, finishes), each kind as its own handler would.
    """
    if any(op.owned for op in ops):  # the owners' fences read the batch's instant
        await batch.clock()
    # A peeked task's claim goes before anything of the batch locks or reads it.
    claiming = (
        await send_claims_first(batch, ops) if any(op.claim is not None for op in ops) else None
    )
    replies, kept = await batch.run(owned_steps.fenced_replies(batch, ops))
    starts = [(i, op.then) for i, op in enumerate(ops) if isinstance(op.then, StartStep)]
    finishes = [(i, op.then) for i, op in enumerate(ops) if isinstance(op.then, FinishTask)]
    tasks = [then.start.task_id for _, then in starts] + [then.task_id for _, then in finishes]
    starts_at, finishes_at = [i for i, _ in starts], [i for i, _ in finishes]
    # A start or an end moves its task's claim: its replies' touch would be overwritten.
    held = _Held(spare=frozenset(tasks))
    replying = await _reply(batch, [replies[i] for i in kept], held) if kept else None
    # A `then` goes only if its replies counted, which needs its task locked and read
    # by `reply`: those rows serve, unless a `then` has no reply recorded here.
    recording = {replies[i].request.task_id for i in kept if replies[i].recorder is not None}
    locked = None if recording.issuperset(tasks) else await send_lock_owners(batch, tasks)

    async def second() -> list[object]:
        claimed = None
        if claiming is not None:
            claimed = await claiming()
            await batch.clock()  # came back with the claims: the writes below read it
        written = [] if replying is None else await replying()
        decided = go_on(ops, owned_steps.spread(len(replies), kept, written), claimed)
        if any(op.waits for op in ops):
            await batch.clock()  # the waits read the batch's instant
            decided = await batch.run(signalling.waited_first(batch, ops, decided))
        owners = held.owners() if locked is None else await locked()
        thens: list[object] = [
            None if counted else stale_then(op)
            for op, (_, counted) in zip(ops, decided, strict=True)
        ]
        going = [(i, start) for i, start in starts if decided[i][1]]
        if going:
            started = await start_with(batch, [start for _, start in going], owners)
            for (i, _), outcome in zip(going, started, strict=True):
                thens[i] = outcome
        ending = [(i, finish) for i, finish in finishes if decided[i][1]]
        if ending:
            finished = await finish_with(batch, [finish for _, finish in ending], owners)
            for (i, _), outcome in zip(ending, finished, strict=True):
                thens[i] = outcome
        failing = [
            (i, op.then)
            for i, op in enumerate(ops)
            if isinstance(op.then, (FailTask, StartCompensation)) and decided[i][1]
        ]
        if failing:
            failed = await write_owned(batch, [then for _, then in failing])
            for (i, _), outcome in zip(failing, failed, strict=True):
                thens[i] = outcome
        if held.withheld:  # the touches of tasks whose start or end did not go after all
            moved = {
                task_id
                for i, task_id in zip((*starts_at, *finishes_at), tasks, strict=True)
                if decided[i][1] and not isinstance(thens[i], Exception)
            }
            if late := [t for t in held.withheld if t not in moved]:
                await batch.send(TOUCH, (batch.now, late))
        parking = [(i, op.then) for i, op in enumerate(ops) if isinstance(op.then, _PARKS)]
        going_to_sleep = [(i, then) for i, then in parking if decided[i][1]]
        if going_to_sleep:
            # A sleep, or a child's start, wait or end (`store.sql.children`), by its handler.
            kinds: dict[type[Any], list[tuple[int, Any]]] = defaultdict(list)
            for i, then in going_to_sleep:
                kinds[type(then)].append((i, then))
            for kind, group in kinds.items():
                parks: list[Any] = [then for _, then in group]
                slept = (
                    await batch.run(sleeps.sleep(batch, parks))
                    if kind is SleepTask
                    else await WRITES[kind](batch, parks)
                )
                for (i, _), outcome in zip(group, slept, strict=True):
                    thens[i] = outcome
        waiting = [(i, op.then) for i, op in enumerate(ops) if isinstance(op.then, WaitSignal)]
        going_to_wait = [(i, then) for i, then in waiting if decided[i][1]]
        if going_to_wait:
            plan = signalling.wait_signals(batch, [then for _, then in going_to_wait])
            for (i, _), outcome in zip(going_to_wait, await batch.run(plan), strict=True):
                thens[i] = outcome
        return [_went(mine, then) for (mine, _), then in zip(decided, thens, strict=True)]

    return second


def _went(replies: tuple[bool | Reply, ...], then: object) -> object:
    """The outcome `Went`, read after the commit if `then`'s is (a request handed over)."""
    if not isinstance(then, Later):
        return Went(replies, then)
    later = then

    async def read() -> object:
        return Went(replies, await later.read())

    return Later(read)


@WRITES.handles(Note)
async def note(batch: PostgresBatch, ops: Sequence[Note]) -> list[object]:
    """Append events to tasks' histories (an agent that timed out or gave up)."""
    return await batch.run(queues.note(batch, ops))


# -- reads ---------------------------------------------------------------------
# Event ids are taken at insert time but become visible at commit, so event 8
# can be visible before event 7, and a transaction's id (xid) says nothing of
# the order of its inserts either. What is final is this: once every
# transaction older than xid X has ended (X <= the snapshot's xmin), no event
# with an xid below X can ever appear. So readers deliver events in (xid, id)
# order, only below the snapshot's xmin, and a cursor (the last event's xid and
# id) never skips one. No lock is held across a round trip for this: a
# cluster-wide one would let one host cut off mid-transaction stall every writer.
_HORIZON = "xid < pg_snapshot_xmin(pg_current_snapshot())"
_CURSOR_XID = "SELECT xid::text FROM events WHERE id = %s"
# Just below the oldest xid among the events kept after a purged cursor (some of
# them may be delivered again; none is skipped).
_NEXT_XID = "SELECT (min(xid::text::numeric) - 1)::text FROM events WHERE id > %s"
_ALL_EVENTS = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE (xid, id) > (%s::xid8, %s) AND {_HORIZON} "
    "ORDER BY xid, id LIMIT %s"
)
_EVENTS_FOR = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE reply_to = %s AND (xid, id) > (%s::xid8, %s) "
    f"AND {_HORIZON} ORDER BY xid, id LIMIT %s"
)


@READS.handles(TaskEvents)
async def task_events(reader: Reader, op: TaskEvents) -> list[Event]:
    """A task's events, oldest first."""
    return await read(reader, queues.task_events(POSTGRES, op))


@READS.handles(ReadEvents)
async def read_events(reader: Reader, op: ReadEvents) -> list[Event]:
    """Events after event `after_id`, in the order they became final (see `_HORIZON`).

    Within one task that is the order they happened in; across tasks, ids
    may come out of numeric order. A cursor whose event is gone (deleted by
    retention) goes on from the events with a higher id (a few of them may
    be delivered again; none is skipped).
    """
    xid = "0"
    if op.after_id > 0:
        rows = await reader.fetch(_CURSOR_XID, (op.after_id,))
        if not rows:  # the cursor's event was purged: go on from the higher ids
            rows = await reader.fetch(_NEXT_XID, (op.after_id,))
        for (found,) in rows[:1]:  # one row of one column, the xid (NULL: no event)
            xid = "0" if found is None else str(found)
    n = limit_of(op.limit)
    if op.reply_to is None:
        rows = await reader.fetch(_ALL_EVENTS, (xid, op.after_id, n))
    else:
        rows = await reader.fetch(_EVENTS_FOR, (op.reply_to, xid, op.after_id, n))
    return [event_from_row(r) for r in rows]
