"""Batch handlers for durable calls (`app.call`): sent, taken, answered, purged.

Every statement runs under the transaction's write lock (BEGIN IMMEDIATE), so
a call is taken by one process at a time, and only the handling that took it
last (its `attempts`) may answer it. Times are the store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

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
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import chunks
from shepherd.store.step_writes import reply_body

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import Batch

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
    "created_at, expires_at, owner_key) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)"
)
_COLUMNS = "call_id, agent, payload, attempts, max_attempts, within, complete_by, owner_key"
# (agents..., now, now, limit)
_WAITING = (
    "SELECT call_id, agent, attempts, max_attempts, within FROM calls WHERE answered_at IS NULL "
    "AND agent IN ({agents}) AND owner_key IS NULL AND visible_at <= ? AND expires_at > ? "
    "ORDER BY id LIMIT ?"
)
# (agent, key, now, limit): a key's calls, in the order sent, whoever took them before.
_OF_KEY = (
    "SELECT call_id, agent, attempts, max_attempts, within FROM calls WHERE agent = ? "
    "AND owner_key = ? AND answered_at IS NULL AND expires_at > ? ORDER BY id LIMIT ?"
)
_BACKLOG = (
    "SELECT count(*), min(created_at) FROM calls WHERE agent = ? AND owner_key = ? "
    "AND answered_at IS NULL AND expires_at > ?"
)
_BACKLOGS = (
    "SELECT owner_key, count(*), min(created_at) FROM calls WHERE agent = ? "
    "AND owner_key IS NOT NULL AND answered_at IS NULL AND expires_at > ? GROUP BY owner_key"
)
_KEYS = (
    "SELECT DISTINCT owner_key FROM calls WHERE agent = ? AND owner_key IS NOT NULL "
    "AND answered_at IS NULL ORDER BY owner_key"
)
# The owner's fence: it holds the key's live lease at that epoch.
_OWNS = (
    "SELECT 1 FROM owner_keys WHERE agent = ? AND key = ? AND owner = ? AND epoch = ? "
    "AND lease_until > ?"
)
_SET_STATE = "UPDATE owner_keys SET state = ?, updated_at = ? WHERE agent = ? AND key = ?"
# (taker, now, now, call ids...): every call of one take in one statement.
_TAKE = (
    "UPDATE calls SET attempts = attempts + 1, taken_by = ?, complete_by = ? + within, "
    f"visible_at = ? + within WHERE call_id IN ({{ids}}) RETURNING {_COLUMNS}"
)
_GIVE_UP = (
    "UPDATE calls SET ok = 0, body = ?, answered_at = ?, taken_by = NULL WHERE call_id = ? "
    f"RETURNING {_COLUMNS}"
)
_ANSWER = (
    "UPDATE calls SET ok = ?, body = ?, answered_at = ? WHERE call_id = ? AND taken_by = ? "
    "AND attempts = ? AND answered_at IS NULL"
)
_ANSWERS = (
    "SELECT call_id, ok, body FROM calls WHERE answered_at IS NOT NULL AND call_id IN ({ids})"
)
_PURGE = (
    "DELETE FROM calls WHERE id IN (SELECT id FROM calls WHERE expires_at <= ? "
    "ORDER BY expires_at LIMIT ?)"
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
        complete_by=unix_instant(float(str(complete_by or 0.0))),
        owner_key=None if owner_key is None else str(owner_key),
    )


@WRITES.handles(SendCall)
def send_call(batch: Batch, ops: Sequence[SendCall]) -> list[object]:
    """Store each call whose payload encodes (one statement); the encoding error is its caller's."""
    now = batch.now
    out: list[object] = []
    rows: list[tuple[object, ...]] = []
    for op in ops:
        payload = batch.encode(op.payload)
        out.append(payload if isinstance(payload, Exception) else None)
        if not isinstance(payload, Exception):
            rows.append(
                (
                    op.call_id,
                    op.agent,
                    payload,
                    op.within,
                    op.max_attempts,
                    now,
                    now,
                    now + op.expires_in,
                    op.owner_key,
                )
            )
    if rows:
        batch.conn.executemany(_SEND, rows)
        batch.rings.add(ch.CALLS)
    return out


@WRITES.handles(TakeCalls)
def take_calls(batch: Batch, ops: Sequence[TakeCalls]) -> list[object]:
    """Take each operation's waiting calls; give up those out of handlings."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        if not op.agents or op.limit <= 0:
            out.append(([], []))
            continue
        query = _WAITING.format(agents=", ".join("?" * len(op.agents)))
        waiting = conn.execute(query, (*op.agents, now, now, op.limit)).fetchall()
        out.append(_take(batch, waiting, op.worker))
    return out


def _take(
    batch: Batch, waiting: Sequence[Sequence[object]], taker: str
) -> tuple[list[CallRequest], list[CallRequest]]:
    """Take `waiting` calls for `taker`, giving up those out of handlings."""
    conn, now = batch.conn, batch.now
    takes: list[str] = []
    given_up: list[CallRequest] = []
    for call_id, agent, attempts, max_attempts, within in waiting:
        if may_take(int(str(attempts)), int(str(max_attempts))):
            takes.append(str(call_id))
            continue
        body = batch.dumps_error(gave_up_body(str(agent), int(str(attempts)), float(str(within))))
        given_up.append(_call(conn.execute(_GIVE_UP, (body, now, call_id)).fetchone()))
        batch.rings.add(ch.ANSWERS)
    rows: dict[str, Sequence[object]] = {}
    for ids in chunks(takes):
        query = _TAKE.format(ids=", ".join("?" * len(ids)))
        rows.update((str(row[0]), row) for row in conn.execute(query, (taker, now, now, *ids)))
    # In the order they were sent (RETURNING's order is not promised).
    return [_call(rows[call_id]) for call_id in takes], given_up


def _owns(batch: Batch, agent: str, key: str, owner: str, epoch: int) -> bool:
    row = batch.conn.execute(_OWNS, (agent, key, owner, epoch, batch.now)).fetchone()
    return row is not None


@WRITES.handles(TakeKeyCalls)
def take_key_calls(batch: Batch, ops: Sequence[TakeKeyCalls]) -> list[object]:
    """Take the next calls of each operation's key, for its owner at its epoch."""
    out: list[object] = []
    for op in ops:
        if op.limit <= 0 or not _owns(batch, op.agent, op.key, op.owner, op.epoch):
            out.append(([], []))
            continue
        params = (op.agent, op.key, batch.now, op.limit)
        out.append(_take(batch, batch.conn.execute(_OF_KEY, params).fetchall(), op.owner))
    return out


@WRITES.handles(AnswerOwned)
def answer_owned(batch: Batch, ops: Sequence[AnswerOwned]) -> list[object]:
    """Each owner's answers and state, where it still owns the key; whether it did."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        state = batch.encode(op.state) if op.set_state else None
        if isinstance(state, Exception):
            out.append(state)
            continue
        if not _owns(batch, op.agent, op.key, op.owner, op.epoch):
            out.append(False)
            continue
        rows = []
        for call_id, attempt, ok, body in op.answers:
            stored_ok, stored = reply_body(
                ok, body, dumps=batch.dumps, dumps_error=batch.dumps_error
            )
            rows.append((int(stored_ok), stored, now, call_id, op.owner, attempt))
        if rows and conn.executemany(_ANSWER, rows).rowcount > 0:  # rows changed, in all
            batch.rings.add(ch.ANSWERS)
        if op.set_state:
            conn.execute(_SET_STATE, (state, now, op.agent, op.key))
        out.append(True)
    return out


@WRITES.handles(AnswerAndTake)
def answer_and_take(batch: Batch, ops: Sequence[AnswerAndTake]) -> list[object]:
    """Each owner's answers and state, then its key's next batch if due (one transaction)."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op, owned in zip(ops, answer_owned(batch, [o.answer for o in ops]), strict=True):
        if owned is not True:
            out.append(owned if isinstance(owned, Exception) else (False, [], [], (0, None)))
            continue
        a = op.answer
        count, oldest = conn.execute(_BACKLOG, (a.agent, a.key, now)).fetchone()
        backlog = (int(count), None if oldest is None else unix_instant(float(oldest)))
        if count and (count >= op.max_items or now - float(oldest) >= op.max_delay):
            waiting = conn.execute(_OF_KEY, (a.agent, a.key, now, op.max_items)).fetchall()
            out.append((True, *_take(batch, waiting, a.owner), backlog))
        else:
            out.append((True, [], [], backlog))
    return out


@READS.handles(KeyBacklogs)
def key_backlogs(at: Reading, op: KeyBacklogs) -> dict[str, tuple[int, datetime]]:
    """Of each key of one agent with calls waiting: how many, and when the oldest was sent."""
    rows = at.conn.execute(_BACKLOGS, (op.agent, at.now)).fetchall()
    return {key: (int(n), unix_instant(float(oldest))) for key, n, oldest in rows}


@READS.handles(WaitingKeys)
def waiting_keys(at: Reading, op: WaitingKeys) -> list[str]:
    """The owning keys of one agent's unanswered calls."""
    return [key for (key,) in at.conn.execute(_KEYS, (op.agent,)).fetchall()]


@WRITES.handles(AnswerCall)
def answer_call(batch: Batch, ops: Sequence[AnswerCall]) -> list[object]:
    """Write each answer where its handling is the call's latest; whether it was."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        ok, body = reply_body(op.ok, op.body, dumps=batch.dumps, dumps_error=batch.dumps_error)
        params = (int(ok), body, now, op.call_id, op.worker, op.attempt)
        answered = conn.execute(_ANSWER, params).rowcount == 1
        if answered:
            batch.rings.add(ch.ANSWERS)
        out.append(answered)
    return out


@WRITES.handles(PurgeCalls)
def purge_calls(batch: Batch, ops: Sequence[PurgeCalls]) -> list[object]:
    """Delete expired calls, up to each operation's limit."""
    return [batch.conn.execute(_PURGE, (batch.now, op.limit)).rowcount for op in ops]


@READS.handles(GetAnswers)
def get_answers(at: Reading, op: GetAnswers) -> dict[str, CallAnswer]:
    """The answers of the answered calls among `op.call_ids`."""
    out: dict[str, CallAnswer] = {}
    ids = list(op.call_ids)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        query = _ANSWERS.format(ids=", ".join("?" * len(chunk)))
        for call_id, ok, body in at.conn.execute(query, chunk).fetchall():
            out[call_id] = CallAnswer(ok=bool(ok), body=loads(body))
    return out
