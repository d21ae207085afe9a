"""Durable calls (`app.call`), for both backends: sent, taken, answered, purged.

A call is taken by one process at a time (each backend's claim: SQLite's write
lock, PostgreSQL's `FOR UPDATE SKIP LOCKED`, passed to `take_calls` as its
`waiting` statement), and only the handling that took it last (its
`attempts`) may answer it. A key's calls are taken by its owner alone, fenced
by its lease at its epoch (`FOR SHARE` on PostgreSQL keeps a taker of the
expiring lease waiting until the answer has committed). Times are the store's
clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shepherd.core.calls import gave_up_body, may_take
from shepherd.core.records import CallAnswer, CallRequest
from shepherd.payloads import loads
from shepherd.store import signals as ch
from shepherd.store.rows import load_resolution
from shepherd.store.sql.plan import Query, changed, count_changed, each, first, one, send
from shepherd.store.step_writes import reply_body

if TYPE_CHECKING:
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
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Rows, Writing

__all__ = [
    "answer_and_take",
    "answer_call",
    "answer_owned",
    "get_answers",
    "key_backlogs",
    "key_calls",
    "owns",
    "purge_calls",
    "send_call",
    "take_calls",
    "take_key_calls",
    "waiting_keys",
]

_INSERT = (
    "INSERT INTO calls (call_id, agent, payload, within, attempts, max_attempts, visible_at, "
    "created_at, expires_at, owner_key, resolution) "
)
# (call_id, agent, payload, within, max_attempts, now, now, expires_at, owner_key, resolution)
_SEND = _INSERT + "VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"
# (now, now, then the columns of many calls as arrays): PostgreSQL, one statement.
_SEND_ARRAYS = (
    _INSERT + "SELECT v.call_id, v.agent, v.payload, v.within, 0, "
    "v.max_attempts, ?, ?, v.expires_at, v.owner_key, v.resolution FROM unnest(?::text[], "
    "?::text[], ?::text[], ?::float8[], ?::int[], ?::timestamptz[], ?::text[], ?::text[]) "
    "WITH ORDINALITY AS v(call_id, agent, payload, within, max_attempts, expires_at, owner_key, "
    "resolution, n) ORDER BY v.n"
)
_COLUMNS = (
    "call_id, agent, payload, attempts, max_attempts, within, complete_by, owner_key, resolution, "
    "reminder, reminder_at"
)
#: The columns a claim of waiting calls (`take_calls`' `waiting`) selects.
WAITING_COLUMNS = "call_id, agent, attempts, max_attempts, within"
# (agent, key, now, limit): a key's calls, in the order sent, whoever took them
# before (its owner alone takes them).
_OF_KEY = (
    f"SELECT {WAITING_COLUMNS} FROM calls WHERE agent = ? AND owner_key = ? "
    "AND answered_at IS NULL AND expires_at > ? ORDER BY id LIMIT ?{for_update}"
)
_BACKLOG = (
    "SELECT count(*), min(created_at) FROM calls WHERE agent = ? AND owner_key = ? "
    "AND answered_at IS NULL AND expires_at > {now}"
)
_BACKLOGS = (
    "SELECT owner_key, count(*), min(created_at) FROM calls WHERE agent = ? "
    "AND owner_key IS NOT NULL AND answered_at IS NULL AND expires_at > {now} GROUP BY owner_key"
)
# The keys of a key's calls, and of its steps' requests (queued or taken).
_KEYS = (
    "SELECT owner_key FROM calls WHERE agent = ? AND owner_key IS NOT NULL "
    "AND answered_at IS NULL UNION SELECT owner_key FROM requests WHERE agent = ? "
    "AND owner_key IS NOT NULL ORDER BY owner_key"
)
# The step requests of each key that no handling has taken yet.
_STEP_BACKLOGS = (
    "SELECT owner_key, count(*), min(created_at) FROM requests WHERE agent = ? "
    "AND owner_key IS NOT NULL AND taken_by IS NULL AND complete_by > {now} GROUP BY owner_key"
)
# The owner's fence: it holds the key's live lease at that epoch.
_OWNS = (
    "SELECT 1 FROM owner_keys WHERE agent = ? AND key = ? AND owner = ? AND epoch = ? "
    "AND lease_until > ?{for_share}"
)
_SET_STATE = "UPDATE owner_keys SET state = ?, updated_at = ? WHERE agent = ? AND key = ?"
# (taker, now, now, call ids): every call of one take in one statement.
_TAKE = (
    "UPDATE calls SET attempts = attempts + 1, taken_by = ?, complete_by = ? + within{seconds}, "
    f"visible_at = ? + within{{seconds}} WHERE call_id {{list}} RETURNING {_COLUMNS}"
)
_GIVE_UP = (
    "UPDATE calls SET ok = 0, body = ?, answered_at = ?, taken_by = NULL WHERE call_id = ? "
    f"RETURNING {_COLUMNS}"
)
_ANSWER = (
    "UPDATE calls SET ok = ?, body = ?, answered_at = ? WHERE call_id = ? AND taken_by = ? "
    "AND attempts = ? AND answered_at IS NULL{changed}"
)
_ANSWERS = "SELECT call_id, ok, body FROM calls WHERE answered_at IS NOT NULL AND call_id {list}"
# The oldest expired calls, up to a limit: found once (`ARRAY(...)` on PostgreSQL).
_PURGE = {
    "sqlite": "DELETE FROM calls WHERE id IN (SELECT id FROM calls WHERE expires_at <= ? "
    "ORDER BY expires_at LIMIT ?) RETURNING id",
    "postgres": "DELETE FROM calls WHERE id = ANY(ARRAY(SELECT id FROM calls "
    "WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)) RETURNING id",
}
_EPOCH = datetime.fromtimestamp(0, UTC)
#: What a take returns: the calls taken, and those given up (out of handlings).
Taken = tuple[list[CallRequest], list[CallRequest]]


def _call(d: Dialect, row: Sequence[Any]) -> CallRequest:
    call_id, agent, payload, attempts, max_attempts, within, complete_by, owner_key, where = row[:9]
    reminder, reminder_at = row[9:11]
    return CallRequest(
        call_id=str(call_id),
        agent=str(agent),
        payload=loads(str(payload)),
        attempt=int(attempts),
        max_attempts=int(max_attempts),
        within=float(within),
        complete_by=_EPOCH if complete_by is None else d.instant(complete_by),
        owner_key=None if owner_key is None else str(owner_key),
        resolution=load_resolution(None if where is None else str(where)),
        reminder=None if reminder is None else str(reminder),
        reminder_at=None if reminder_at is None else d.instant(reminder_at),
    )


def send_call(batch: Writing, ops: Sequence[SendCall]) -> Plan[list[object]]:
    """Store each call whose payload encodes; the encoding error is its caller's.

    One row, or SQLite's many, go by `_SEND`; PostgreSQL's many by one
    statement over arrays.
    """
    d, now = batch.dialect, batch.now
    out: list[object] = []
    rows: list[tuple[object, ...]] = []
    for op in ops:
        payload = batch.encode(op.payload)
        where = None if op.resolution is None else batch.encode(op.resolution.to_json())
        failed = next((v for v in (payload, where) if isinstance(v, Exception)), None)
        out.append(failed)
        if failed is None:
            expires = d.later(now, op.expires_in)
            rows.append(
                (
                    op.call_id,
                    op.agent,
                    payload,
                    op.within,
                    op.max_attempts,
                    expires,
                    op.owner_key,
                    where,
                )
            )
    if len(rows) > 1 and d.arrays:
        yield from send(
            d.sql(_SEND_ARRAYS), (now, now, *(list(c) for c in zip(*rows, strict=True)))
        )
    elif rows:
        params = [(c, a, p, w, m, now, now, e, k, r) for c, a, p, w, m, e, k, r in rows]
        yield [each(d.sql(_SEND), params)]
    if rows:
        batch.rings.add(ch.CALLS)
    return out


def take_calls(batch: Writing, ops: Sequence[TakeCalls], *, waiting: str) -> Plan[list[object]]:
    """Take each operation's waiting calls; give up those out of handlings.

    `waiting` is the backend's claim, a template selecting WAITING_COLUMNS of
    the calls to take: (agents as `{list}`, `{now}`, `{now}`, limit).
    """
    d, now = batch.dialect, batch.instant  # `{now}`: PostgreSQL need not wait for its clock
    out: list[object] = []
    for op in ops:
        if not op.agents or op.limit <= 0:
            out.append(([], []))
            continue
        sql, agents = d.listed(waiting, op.agents)
        found = yield from one(sql, (*agents, now, now, op.limit))
        out.append((yield from _take(batch, found, op.worker)))
    return out


def _take(batch: Writing, waiting: Rows, taker: str) -> Plan[Taken]:
    """Take `waiting` calls for `taker`, giving up those out of handlings (sent together)."""
    d, now = batch.dialect, batch.now
    takes: list[str] = []
    queries: list[Query] = []
    for call_id, agent, attempts, max_attempts, within in waiting:
        if may_take(int(attempts), int(max_attempts)):
            takes.append(str(call_id))
            continue
        body = batch.dumps_error(gave_up_body(str(agent), int(attempts), float(within)))
        queries.append(Query(d.sql(_GIVE_UP), (body, now, call_id)))
    chunks = d.chunks(takes)
    for ids in chunks:
        sql, listed = d.listed(_TAKE, ids)
        queries.append(Query(sql, (taker, now, now, *listed)))
    if not queries:
        return [], []
    found = yield queries
    given_up = [_call(d, rows[0]) for rows in found[: len(found) - len(chunks)] if rows]
    if given_up:
        batch.rings.add(ch.ANSWERS)
    rows = {str(row[0]): row for taken in found[len(found) - len(chunks) :] for row in taken}
    # In the order they were sent (RETURNING's order is not promised).
    return [_call(d, rows[call_id]) for call_id in takes], given_up


def owns(batch: Writing, agent: str, key: str, owner: str, epoch: int) -> Plan[bool]:
    params = (agent, key, owner, epoch, batch.now)
    return (yield from first(batch.dialect.sql(_OWNS), params)) is not None


def take_key_calls(batch: Writing, ops: Sequence[TakeKeyCalls]) -> Plan[list[object]]:
    """Take the next calls of each operation's key, for its owner at its epoch."""
    out: list[object] = []
    for op in ops:
        if op.limit <= 0 or not (yield from owns(batch, op.agent, op.key, op.owner, op.epoch)):
            out.append(([], []))
            continue
        out.append((yield from key_calls(batch, op.agent, op.key, op.owner, op.limit)))
    return out


def key_calls(batch: Writing, agent: str, key: str, owner: str, limit: int) -> Plan[Taken]:
    """Take the next `limit` calls of a key for its owner (whose fence is checked already)."""
    found = yield from one(batch.dialect.sql(_OF_KEY), (agent, key, batch.now, limit))
    return (yield from _take(batch, found, owner))


def answer_owned(batch: Writing, ops: Sequence[AnswerOwned]) -> Plan[list[object]]:
    """Each owner's answers and state, where it still owns the key; whether it did."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        state = batch.encode(op.state) if op.set_state else None
        if isinstance(state, Exception):
            out.append(state)
            continue
        if not (yield from owns(batch, op.agent, op.key, op.owner, op.epoch)):
            out.append(False)
            continue
        params = []
        for call_id, attempt, ok, body in op.answers:
            stored_ok, stored = reply_body(
                ok, body, dumps=batch.dumps, dumps_error=batch.dumps_error
            )
            params.append((int(stored_ok), stored, now, call_id, op.owner, attempt))
        if params and (yield from count_changed(d.sql(_ANSWER), params)) > 0:
            batch.rings.add(ch.ANSWERS)
        if op.set_state:
            yield from send(d.sql(_SET_STATE), (state, now, op.agent, op.key))
        out.append(True)
    return out


def answer_and_take(batch: Writing, ops: Sequence[AnswerAndTake]) -> Plan[list[object]]:
    """Each owner's answers and state, then its key's next batch if due (one transaction)."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    answered = yield from answer_owned(batch, [o.answer for o in ops])
    for op, owned in zip(ops, answered, strict=True):
        if owned is not True:
            out.append(owned if isinstance(owned, Exception) else (False, [], [], (0, None)))
            continue
        a = op.answer
        count, oldest = (yield from one(d.sql(_BACKLOG), (a.agent, a.key, now)))[0]
        backlog = (int(count), None if oldest is None else d.instant(oldest))
        if count and (count >= op.max_items or d.between(now, oldest) >= op.max_delay):
            found = yield from one(d.sql(_OF_KEY), (a.agent, a.key, now, op.max_items))
            out.append((True, *(yield from _take(batch, found, a.owner)), backlog))
        else:
            out.append((True, [], [], backlog))
    return out


def answer_call(batch: Writing, ops: Sequence[AnswerCall]) -> Plan[list[object]]:
    """Write each answer where its handling is the call's latest; whether it was."""
    d, now = batch.dialect, batch.now
    sql = d.sql(_ANSWER)
    queries = []
    for op in ops:
        ok, body = reply_body(op.ok, op.body, dumps=batch.dumps, dumps_error=batch.dumps_error)
        queries.append(changed(sql, [(int(ok), body, now, op.call_id, op.worker, op.attempt)]))
    answered = [rows[0][0] == 1 for rows in (yield queries)]
    if any(answered):
        batch.rings.add(ch.ANSWERS)
    return list(answered)


def purge_calls(batch: Writing, ops: Sequence[PurgeCalls]) -> Plan[list[object]]:
    """Delete expired calls, up to each operation's limit."""
    d = batch.dialect
    sql = d.sql(_PURGE[d.name])
    return [len(rows) for rows in (yield [Query(sql, (batch.now, op.limit)) for op in ops])]


# -- reads ---------------------------------------------------------------------
def key_backlogs(d: Dialect, now: object, op: KeyBacklogs) -> Plan[dict[str, tuple[int, datetime]]]:
    """Of each key of one agent with calls or steps waiting: how many, and the oldest's send."""
    calls, steps = yield [
        Query(d.sql(_BACKLOGS), (op.agent, now)),
        Query(d.sql(_STEP_BACKLOGS), (op.agent, now)),
    ]
    backlogs: dict[str, tuple[int, datetime]] = {}
    for key, n, oldest in (*calls, *steps):
        at = d.instant(oldest)
        had = backlogs.get(str(key))
        backlogs[str(key)] = (int(n), at) if had is None else (had[0] + int(n), min(had[1], at))
    return backlogs


def waiting_keys(d: Dialect, op: WaitingKeys) -> Plan[list[str]]:
    """The owning keys of one agent's unanswered calls."""
    return [str(key) for (key,) in (yield from one(d.sql(_KEYS), (op.agent, op.agent)))]


def get_answers(d: Dialect, op: GetAnswers) -> Plan[dict[str, CallAnswer]]:
    """The answers of the answered calls among `op.call_ids`."""
    queries = [Query(*d.listed(_ANSWERS, ids)) for ids in d.chunks(list(op.call_ids))]
    found = yield queries
    return {
        call_id: CallAnswer(ok=bool(ok), body=loads(body))
        for rows in found
        for call_id, ok, body in rows
    }
