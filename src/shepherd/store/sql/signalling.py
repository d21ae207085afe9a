"""Signals for both backends: send one to a task, a workflow's wait for one, a task's inbox.

Both writes hold the task's row first (`FOR UPDATE` on PostgreSQL; SQLite's
write transaction holds the database), so a send and a wait of one task are
serialised: either the wait finds the signal in the inbox and consumes it, or
the send finds the wait's step running and consumes the signal into it. No
signal is consumed twice and none is left while a wait of its name runs.
Signals of one name are consumed oldest first (by id, the order sent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shepherd.core.events import EventKind
from shepherd.core.signalling import REFUSING, Signal, step_name, wait_until
from shepherd.errors import InvalidStateError, StaleEpochError, UnknownTaskError
from shepherd.payloads import dumps_detail, loads
from shepherd.store import signals as ch
from shepherd.store.ops import Sent, Waited
from shepherd.store.sql.plan import first, one, send

if TYPE_CHECKING:
    from shepherd.store.ops import ReplyThen, SendSignal, TaskSignals, WaitSignal
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["send_signals", "task_signals", "wait_signals", "waited_first"]

_BY_ID = "SELECT id, process_state, locked_by, key, reply_to FROM tasks WHERE id = ?{for_update}"
_BY_KEY = (
    "SELECT id, process_state, locked_by, key, reply_to FROM tasks "
    "WHERE workflow = ? AND key = ?{for_update}"
)
_SAME_KEY = "SELECT id FROM signals WHERE task_id = ? AND idempotency_key = ?"
_INSERT = (
    "INSERT INTO signals (task_id, name, payload, idempotency_key, sent_by, sent_at) "
    "VALUES (?, ?, ?, ?{text}, ?{text}, ?) RETURNING id"
)
_WAITING_STEP = (
    "SELECT seq FROM steps WHERE task_id = ? AND kind = 'signal' AND agent = ? "
    "AND state = 'running' ORDER BY seq LIMIT 1"
)
_CONSUME = "UPDATE signals SET consumed_seq = ?, consumed_at = ? WHERE id = ?"
_COMPLETE = "UPDATE steps SET state = 'completed', result = ?, finished_at = ? WHERE task_id = ? AND seq = ?"
_DUE_NOW = (
    "UPDATE tasks SET not_before = ?, updated_at = ? "
    "WHERE id = ? AND process_state = 'pending' AND locked_by IS NULL"
)
_HELD = (
    "SELECT key, reply_to FROM tasks WHERE id = ? AND lock_epoch = ? AND locked_by = ? "
    "AND process_state = 'processing'{for_update}"
)
_STEP = "SELECT state, result, complete_by FROM steps WHERE task_id = ? AND seq = ?"
_OLDEST = (
    "SELECT id, payload FROM signals WHERE task_id = ? AND name = ? AND consumed_seq IS NULL "
    "ORDER BY id LIMIT 1"
)
# A wait's step: its complete_by (the timeout) and started_at kept from its first record.
_RECORD = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, request, "
    "result, error, started_at, finished_at) "
    "VALUES (?, ?, 'signal', ?, ?, 1, ?{ts}, ?, ?{text}, ?{text}, ?, ?{ts}) "
    "ON CONFLICT (task_id, seq) DO UPDATE SET state = excluded.state, "
    "result = excluded.result, error = excluded.error, finished_at = excluded.finished_at"
)
_RELEASE = (
    "UPDATE tasks SET process_state = 'pending', locked_by = NULL, complete_by = NULL, "
    "not_before = ?, updated_at = ? WHERE id = ?"
)
_LIST = (
    "SELECT id, task_id, name, payload, idempotency_key, sent_at, consumed_seq, consumed_at "
    "FROM signals WHERE task_id = ? ORDER BY id"
)


def send_signals(batch: Writing, ops: Sequence[SendSignal]) -> Plan[list[object]]:
    """Store each signal (once per idempotency key); consume it into a running wait of its name."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    for op in ops:
        payload = batch.encode(op.payload)
        if isinstance(payload, Exception):
            out.append(payload)
            continue
        if op.task_id is not None:
            named = op.task_id
            row = yield from first(d.sql(_BY_ID), (op.task_id,))
        else:
            named = f"{op.workflow}/{op.key}"
            row = yield from first(d.sql(_BY_KEY), (op.workflow, op.key))
        if row is None:
            out.append(UnknownTaskError(named))
            continue
        task_id, state, locked_by, key, reply_to = row
        if state in REFUSING:
            out.append(InvalidStateError(task_id, str(state), f"signal {op.name!r} to"))
            continue
        if op.idempotency_key is not None:
            same = yield from first(d.sql(_SAME_KEY), (task_id, op.idempotency_key))
            if same is not None:
                out.append(Sent(id=int(same[0]), task_id=task_id, duplicate=True, delivered=False))
                continue
        params = (task_id, op.name, payload, op.idempotency_key, op.by, now)
        (signal_id,) = (yield from one(d.sql(_INSERT), params))[0]
        detail = {"name": op.name, "signal": signal_id, "by": op.by}
        batch.event(task_id, key, reply_to, EventKind.SIGNALLED, dumps_detail(detail))
        found = yield from first(d.sql(_WAITING_STEP), (task_id, step_name(op.name)))
        if found is not None:
            seq = int(found[0])
            yield from send(d.sql(_CONSUME), (seq, now, signal_id))
            yield from send(d.sql(_COMPLETE), (payload, now, task_id, seq))
            if state == "pending" and locked_by is None:
                yield from send(d.sql(_DUE_NOW), (now, now, task_id))
                batch.rings.add(ch.TASKS)
            received = {"name": op.name, "signal": signal_id, "seq": seq}
            batch.event(task_id, key, reply_to, EventKind.SIGNAL_RECEIVED, dumps_detail(received))
        out.append(
            Sent(id=signal_id, task_id=task_id, duplicate=False, delivered=found is not None)
        )
    return out


def wait_signals(batch: Writing, ops: Sequence[WaitSignal]) -> Plan[list[object]]:
    """Each holder's wait: consume the oldest signal of its name, time out, or give up the claim."""
    d, now = batch.dialect, batch.now
    at = d.instant(now)
    out: list[object] = []
    for op in ops:
        held = yield from first(d.sql(_HELD), (op.task_id, op.epoch, op.locked_by))
        if held is None:
            out.append(StaleEpochError(op.task_id, op.epoch))
            continue
        key, reply_to = held
        step = yield from first(d.sql(_STEP), (op.task_id, op.seq))
        if step is not None and step[0] == "completed":  # a sender consumed one into it
            out.append(Waited(outcome="received", payload=_payload(step[1])))
            continue
        if step is not None and step[0] == "failed":
            out.append(Waited(outcome="timed_out"))
            continue
        timeout = None if op.timeout_at is None else d.stored(op.timeout_at)
        base = (op.task_id, op.seq, step_name(op.name))
        request = dumps_detail({"name": op.name})
        oldest = yield from first(d.sql(_OLDEST), (op.task_id, op.name))
        if oldest is not None:
            signal_id, payload = oldest
            yield from send(d.sql(_CONSUME), (op.seq, now, signal_id))
            record: tuple[object, ...] = (
                *base,
                "completed",
                timeout,
                request,
                payload,
                None,
                now,
                now,
            )
            yield from send(d.sql(_RECORD), record)
            detail = {"name": op.name, "signal": signal_id, "seq": op.seq}
            batch.event(op.task_id, key, reply_to, EventKind.SIGNAL_RECEIVED, dumps_detail(detail))
            out.append(Waited(outcome="received", payload=_payload(payload)))
            continue
        if op.timeout_at is not None and op.timeout_at <= at:
            error = batch.dumps_error(
                {"type": "SignalTimeoutError", "name": op.name, "timeout_at": _iso(op.timeout_at)}
            )
            record = (*base, "failed", timeout, request, None, error, now, now)
            yield from send(d.sql(_RECORD), record)
            detail = {"name": op.name, "seq": op.seq}
            batch.event(op.task_id, key, reply_to, EventKind.SIGNAL_TIMED_OUT, dumps_detail(detail))
            out.append(Waited(outcome="timed_out"))
            continue
        record = (*base, "running", timeout, request, None, None, now, None)
        yield from send(d.sql(_RECORD), record)
        yield from send(d.sql(_RELEASE), (d.stored(wait_until(op.timeout_at)), now, op.task_id))
        detail = {"name": op.name, "seq": op.seq, "timeout_at": _iso(op.timeout_at)}
        batch.event(op.task_id, key, reply_to, EventKind.WAITING, dumps_detail(detail))
        out.append(Waited(outcome="waiting"))
    # No ring for a waiting task: it is due at its timeout (or a signal rings).
    return out


def task_signals(d: Dialect, op: TaskSignals) -> Plan[list[Signal]]:
    """A task's signals, in the order sent."""
    rows = yield from one(d.sql(_LIST), (op.task_id,))
    return [
        Signal(
            id=int(row[0]),
            task_id=row[1],
            name=row[2],
            payload=_payload(row[3]),
            idempotency_key=row[4],
            sent_at=d.instant(row[5]),
            consumed_seq=None if row[6] is None else int(row[6]),
            consumed_at=None if row[7] is None else d.instant(row[7]),
        )
        for row in rows
    ]


def _payload(text: Any) -> Any:
    return None if text is None else loads(text)


def _iso(at: Any) -> str | None:
    return None if at is None else str(at.isoformat())


def waited_first(
    batch: Writing, ops: Sequence[ReplyThen], decided: Sequence[tuple[Any, bool]]
) -> Plan[list[tuple[Any, bool]]]:
    """`decided` (per `reply_then` operation: its replies' outcomes, whether `then` goes),
    once each going operation's waits (`ReplyThen.waits`) have consumed their signals.

    An operation whose wait did not receive its signal (none left in the
    inbox: the wait was recorded as `wait_signal` records it) does not go.
    """
    out = list(decided)
    for i, op in enumerate(ops):
        if not op.waits or not decided[i][1]:
            continue
        outcomes = yield from wait_signals(batch, op.waits)
        if not all(isinstance(o, Waited) and o.outcome == "received" for o in outcomes):
            out[i] = (decided[i][0], False)
    return out
