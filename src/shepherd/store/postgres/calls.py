"""Batch handlers for durable calls (`app.call`): sent, taken, answered, purged.

Calls are taken with `FOR UPDATE SKIP LOCKED`, so concurrent takers never get
the same call, and only the handling that took a call last (its `attempts`)
may answer it. Times are the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from shepherd.core.calls import gave_up_body, may_take
from shepherd.core.records import CallAnswer, CallRequest
from shepherd.payloads import loads
from shepherd.store import signals as ch
from shepherd.store.ops import (
    AnswerAndTake,
    AnswerCall,
    AnswerOwned,
    GetAnswers,
    KeyBacklogs,
    PurgeCalls,
    SendCall,
    TakeCalls,
    TakeKeyCalls,
    WaitingKeys,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import utc
from shepherd.store.step_writes import reply_body

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

__all__ = [
    "answer_and_take",
    "answer_call",
    "answer_owned",
    "get_answers",
    "key_backlogs",
    "purge_calls",
    "send_call",
    "take_calls",
    "take_key_calls",
    "waiting_keys",
]

_SEND = (
    "INSERT INTO calls (call_id, agent, payload, within, attempts, max_attempts, visible_at, "
    "created_at, expires_at, owner_key) VALUES (%s, %s, %s, %s, 0, %s, %s, %s, %s, %s)"
)
_SEND_MANY = (
    "INSERT INTO calls (call_id, agent, payload, within, attempts, max_attempts, visible_at, "
    "created_at, expires_at, owner_key) SELECT v.call_id, v.agent, v.payload, v.within, 0, "
    "v.max_attempts, %s, %s, v.expires_at, v.owner_key FROM unnest(%s::text[], %s::text[], "
    "%s::text[], %s::float8[], %s::int[], %s::timestamptz[], %s::text[]) WITH ORDINALITY "
    "AS v(call_id, agent, payload, within, max_attempts, expires_at, owner_key, n) ORDER BY v.n"
)
_COLUMNS = "call_id, agent, payload, attempts, max_attempts, within, complete_by, owner_key"
# The ids are locked in an ARRAY(...) sub-select, run once (see queues._TAKE).
_WAITING = (
    "SELECT call_id, agent, attempts, max_attempts, within FROM calls "
    "WHERE id = ANY(ARRAY(SELECT id FROM calls WHERE answered_at IS NULL "
    "AND agent = ANY(%s::text[]) AND owner_key IS NULL AND visible_at <= %s "
    "AND expires_at > %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)) ORDER BY id"
)
# A key's calls, in the order sent, whoever took them before (its owner alone takes them).
_OF_KEY = (
    "SELECT call_id, agent, attempts, max_attempts, within FROM calls WHERE agent = %s "
    "AND owner_key = %s AND answered_at IS NULL AND expires_at > %s ORDER BY id LIMIT %s "
    "FOR UPDATE"
)
_BACKLOG = (
    "SELECT count(*), min(created_at) FROM calls WHERE agent = %s AND owner_key = %s "
    "AND answered_at IS NULL AND expires_at > now()"
)
_BACKLOGS = (
    "SELECT owner_key, count(*), min(created_at) FROM calls WHERE agent = %s "
    "AND owner_key IS NOT NULL AND answered_at IS NULL AND expires_at > now() GROUP BY owner_key"
)
_KEYS = (
    "SELECT DISTINCT owner_key FROM calls WHERE agent = %s AND owner_key IS NOT NULL "
    "AND answered_at IS NULL ORDER BY owner_key"
)
# The owner's fence: it holds the key's live lease at that epoch. FOR SHARE keeps a
# taker of the expiring lease waiting until this transaction has committed.
_OWNS = (
    "SELECT 1 FROM owner_keys WHERE agent = %s AND key = %s AND owner = %s AND epoch = %s "
    "AND lease_until > %s FOR SHARE"
)
_SET_STATE = "UPDATE owner_keys SET state = %s, updated_at = %s WHERE agent = %s AND key = %s"
_TAKE = (
    "UPDATE calls SET attempts = attempts + 1, taken_by = %s, "
    "complete_by = %s + within * interval '1 second', "
    "visible_at = %s + within * interval '1 second' "
    f"WHERE call_id = ANY(%s::text[]) RETURNING {_COLUMNS}"
)
_GIVE_UP = (
    "UPDATE calls SET ok = 0, body = %s, answered_at = %s, taken_by = NULL "
    f"WHERE call_id = %s RETURNING {_COLUMNS}"
)
_ANSWER = (
    "UPDATE calls SET ok = %s, body = %s, answered_at = %s WHERE call_id = %s "
    "AND taken_by = %s AND attempts = %s AND answered_at IS NULL RETURNING call_id"
)
_ANSWERS = (
    "SELECT call_id, ok, body FROM calls WHERE call_id = ANY(%s::text[]) "
    "AND answered_at IS NOT NULL"
)
_PURGE = (
    "DELETE FROM calls WHERE id = ANY(ARRAY(SELECT id FROM calls WHERE expires_at <= %s "
    "ORDER BY expires_at LIMIT %s)) RETURNING id"
)


def _call(row: Sequence[object]) -> CallRequest:
    call_id, agent, payload, attempts, max_attempts, within, complete_by, owner_key = row
    return CallRequest(
        call_id=str(call_id),
        agent=str(agent),
        payload=loads(str(payload)),
        attempt=int(str(attempts)),
        max_attempts=int(str(max_attempts)),
        within=float(str(within)),
        complete_by=utc(complete_by),  # type: ignore[arg-type]
        owner_key=None if owner_key is None else str(owner_key),
    )


@WRITES.handles(SendCall)
async def send_call(batch: Batch, ops: Sequence[SendCall]) -> list[object]:
    """Store each call whose payload encodes; the encoding error is its caller's.

    One row is one plain INSERT; more go in one statement over arrays.
    """
    now = batch.now
    out: list[object] = []
    rows: list[tuple[object, ...]] = []
    for op in ops:
        payload = batch.encode(op.payload)
        out.append(payload if isinstance(payload, Exception) else None)
        if not isinstance(payload, Exception):
            expires = now + timedelta(seconds=op.expires_in)
            rows.append(
                (op.call_id, op.agent, payload, op.within, op.max_attempts, expires, op.owner_key)
            )
    if len(rows) == 1:
        (call_id, agent, text, within, most, until, key) = rows[0]
        await batch.send(_SEND, (call_id, agent, text, within, most, now, now, until, key))
    elif rows:
        await batch.send(_SEND_MANY, (now, now, *(list(c) for c in zip(*rows, strict=True))))
    if rows:
        batch.rings.add(ch.CALLS)
    return out


@WRITES.handles(TakeCalls)
async def take_calls(batch: Batch, ops: Sequence[TakeCalls]) -> list[object]:
    """Take each operation's waiting calls; give up those out of handlings."""
    now = batch.now
    out: list[object] = []
    for op in ops:
        if not op.agents or op.limit <= 0:
            out.append(([], []))
            continue
        cursor = await batch.send(_WAITING, (list(op.agents), now, now, op.limit))
        out.append(await _take(batch, await cursor.fetchall(), op.worker))
    return out


async def _take(
    batch: Batch, waiting: Sequence[Sequence[object]], taker: str
) -> tuple[list[CallRequest], list[CallRequest]]:
    """Take `waiting` calls for `taker`, giving up those out of handlings."""
    now = batch.now
    to_take = [str(r[0]) for r in waiting if may_take(int(str(r[2])), int(str(r[3])))]
    taken: list[CallRequest] = []
    if to_take:
        rows = await (await batch.send(_TAKE, (taker, now, now, to_take))).fetchall()
        order = {call_id: i for i, call_id in enumerate(to_take)}
        taken = sorted((_call(r) for r in rows), key=lambda c: order[c.call_id])
    given_up: list[CallRequest] = []
    for call_id, agent, attempts, most, within in waiting:
        if may_take(int(str(attempts)), int(str(most))):
            continue
        body = batch.dumps_error(gave_up_body(str(agent), int(str(attempts)), float(str(within))))
        row = await (await batch.send(_GIVE_UP, (body, now, call_id))).fetchone()
        if row is not None:
            given_up.append(_call(row))
            batch.rings.add(ch.ANSWERS)
    return taken, given_up


async def _owns(batch: Batch, agent: str, key: str, owner: str, epoch: int) -> bool:
    return await batch.scalar(_OWNS, (agent, key, owner, epoch, batch.now)) is not None


@WRITES.handles(TakeKeyCalls)
async def take_key_calls(batch: Batch, ops: Sequence[TakeKeyCalls]) -> list[object]:
    """Take the next calls of each operation's key, for its owner at its epoch."""
    out: list[object] = []
    for op in ops:
        if op.limit <= 0 or not await _owns(batch, op.agent, op.key, op.owner, op.epoch):
            out.append(([], []))
            continue
        cursor = await batch.send(_OF_KEY, (op.agent, op.key, batch.now, op.limit))
        out.append(await _take(batch, await cursor.fetchall(), op.owner))
    return out


@WRITES.handles(AnswerOwned)
async def answer_owned(batch: Batch, ops: Sequence[AnswerOwned]) -> list[object]:
    """Each owner's answers and state, where it still owns the key; whether it did."""
    now = batch.now
    out: list[object] = []
    for op in ops:
        state = batch.encode(op.state) if op.set_state else None
        if isinstance(state, Exception):
            out.append(state)
            continue
        if not await _owns(batch, op.agent, op.key, op.owner, op.epoch):
            out.append(False)
            continue
        params = []
        for call_id, attempt, ok, body in op.answers:
            stored_ok, stored = reply_body(
                ok, body, dumps=batch.dumps, dumps_error=batch.dumps_error
            )
            params.append((int(stored_ok), stored, now, call_id, op.owner, attempt))
        if any(await batch.found(_ANSWER, params)):
            batch.rings.add(ch.ANSWERS)
        if op.set_state:
            await batch.send(_SET_STATE, (state, now, op.agent, op.key))
        out.append(True)
    return out


@WRITES.handles(AnswerAndTake)
async def answer_and_take(batch: Batch, ops: Sequence[AnswerAndTake]) -> list[object]:
    """Each owner's answers and state, then its key's next batch if due (one transaction)."""
    now = batch.now
    out: list[object] = []
    answered = await answer_owned(batch, [o.answer for o in ops])
    for op, owned in zip(ops, answered, strict=True):
        if owned is not True:
            out.append(owned if isinstance(owned, Exception) else (False, [], [], (0, None)))
            continue
        a = op.answer
        row = await (await batch.send(_BACKLOG, (a.agent, a.key))).fetchone()
        count, oldest = (0, None) if row is None else row
        backlog = (int(count), None if oldest is None else utc(oldest))
        due = count and (
            count >= op.max_items or (now - utc(oldest)).total_seconds() >= op.max_delay
        )
        if due:
            cursor = await batch.send(_OF_KEY, (a.agent, a.key, now, op.max_items))
            out.append((True, *await _take(batch, await cursor.fetchall(), a.owner), backlog))
        else:
            out.append((True, [], [], backlog))
    return out


@READS.handles(KeyBacklogs)
async def key_backlogs(reader: Reader, op: KeyBacklogs) -> dict[str, tuple[int, datetime]]:
    """Of each key of one agent with calls waiting: how many, and when the oldest was sent."""
    rows = await reader.fetch(_BACKLOGS, (op.agent,))
    return {str(key): (int(n), utc(oldest)) for key, n, oldest in rows}


@READS.handles(WaitingKeys)
async def waiting_keys(reader: Reader, op: WaitingKeys) -> list[str]:
    """The owning keys of one agent's unanswered calls."""
    return [str(key) for (key,) in await reader.fetch(_KEYS, (op.agent,))]


@WRITES.handles(AnswerCall)
async def answer_call(batch: Batch, ops: Sequence[AnswerCall]) -> list[object]:
    """Write each answer where its handling is the call's latest; whether it was."""
    now = batch.now
    params = []
    for op in ops:
        ok, body = reply_body(op.ok, op.body, dumps=batch.dumps, dumps_error=batch.dumps_error)
        params.append((int(ok), body, now, op.call_id, op.worker, op.attempt))
    answered = await batch.found(_ANSWER, params)
    if any(answered):
        batch.rings.add(ch.ANSWERS)
    return list(answered)


@WRITES.handles(PurgeCalls)
async def purge_calls(batch: Batch, ops: Sequence[PurgeCalls]) -> list[object]:
    """Delete expired calls, up to each operation's limit."""
    cursors = [await batch.send(_PURGE, (batch.now, op.limit)) for op in ops]
    return [len(await cursor.fetchall()) for cursor in cursors]


@READS.handles(GetAnswers)
async def get_answers(reader: Reader, op: GetAnswers) -> dict[str, CallAnswer]:
    """The answers of the answered calls among `op.call_ids`."""
    rows = await reader.fetch(_ANSWERS, (list(op.call_ids),))
    return {call_id: CallAnswer(ok=bool(ok), body=loads(body)) for call_id, ok, body in rows}
