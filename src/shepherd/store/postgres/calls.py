"""Batch handlers for durable calls (`app.call`): sent, taken, answered, purged.

Calls are taken with `FOR UPDATE SKIP LOCKED`, so concurrent takers never get
the same call, and only the handling that took a call last (its `attempts`)
may answer it. Times are the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.calls import gave_up_body, may_take
from shepherd.core.records import CallAnswer, CallRequest
from shepherd.payloads import loads
from shepherd.store import signals as ch
from shepherd.store.ops import AnswerCall, GetAnswers, PurgeCalls, SendCall, TakeCalls
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import utc
from shepherd.store.step_writes import reply_body

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

__all__ = ["answer_call", "get_answers", "purge_calls", "send_call", "take_calls"]

_SEND = (
    "INSERT INTO calls (call_id, agent, payload, within, attempts, max_attempts, visible_at, "
    "created_at, expires_at) VALUES (%s, %s, %s, %s, 0, %s, %s, %s, %s)"
)
_COLUMNS = "call_id, agent, payload, attempts, max_attempts, within, complete_by"
# The ids are locked in an ARRAY(...) sub-select, run once (see queues._TAKE).
_WAITING = (
    "SELECT call_id, agent, attempts, max_attempts, within FROM calls "
    "WHERE id = ANY(ARRAY(SELECT id FROM calls WHERE answered_at IS NULL "
    "AND agent = ANY(%s::text[]) AND visible_at <= %s AND expires_at > %s "
    "ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)) ORDER BY id"
)
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
    call_id, agent, payload, attempts, max_attempts, within, complete_by = row
    return CallRequest(
        call_id=str(call_id),
        agent=str(agent),
        payload=loads(str(payload)),
        attempt=int(str(attempts)),
        max_attempts=int(str(max_attempts)),
        within=float(str(within)),
        complete_by=utc(complete_by),  # type: ignore[arg-type]
    )


@WRITES.handles(SendCall)
async def send_call(batch: Batch, ops: Sequence[SendCall]) -> list[object]:
    """Store each call whose payload encodes; the encoding error is its caller's."""
    now = batch.now
    out: list[object] = []
    for op in ops:
        payload = batch.encode(op.payload)
        if isinstance(payload, Exception):
            out.append(payload)
            continue
        expires = now + timedelta(seconds=op.expires_in)
        params = (op.call_id, op.agent, payload, op.within, op.max_attempts, now, now, expires)
        await batch.send(_SEND, params)
        batch.rings.add(ch.CALLS)
        out.append(None)
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
        waiting = await cursor.fetchall()
        to_take = [call_id for call_id, _, attempts, most, _ in waiting if may_take(attempts, most)]
        taken: list[CallRequest] = []
        if to_take:
            rows = await (await batch.send(_TAKE, (op.worker, now, now, to_take))).fetchall()
            order = {call_id: i for i, call_id in enumerate(to_take)}
            taken = sorted((_call(r) for r in rows), key=lambda c: order[c.call_id])
        given_up: list[CallRequest] = []
        for call_id, agent, attempts, most, within in waiting:
            if may_take(attempts, most):
                continue
            body = batch.dumps_error(gave_up_body(agent, attempts, within))
            row = await (await batch.send(_GIVE_UP, (body, now, call_id))).fetchone()
            if row is not None:
                given_up.append(_call(row))
                batch.rings.add(ch.ANSWERS)
        out.append((taken, given_up))
    return out


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
