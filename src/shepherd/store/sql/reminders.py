"""Reminders of exclusive owners, for both backends: set, forgotten, fired, listed.

Firing reads the due reminders (locked `FOR UPDATE` on PostgreSQL, so that a
second leader's firing waits and then sees them moved on; SQLite's write
transaction holds the database), asks `core.reminders.fire` what each queues,
and in the same transaction moves each to its next tick and inserts its call,
whose id is the tick's (`ON CONFLICT DO NOTHING`): one tick, one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shepherd.core.reminders import Reminder, fire, tick_call_id
from shepherd.payloads import loads
from shepherd.store import signals as ch
from shepherd.store.sql.plan import Query, first, one

if TYPE_CHECKING:
    from shepherd.store.ops import (
        FireReminders,
        ForgetReminder,
        ListReminders,
        SetReminder,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = [
    "KEEP_AFTER",
    "fire_reminders",
    "forget",
    "list_reminders",
    "next_reminder",
    "set_reminders",
]

#: Seconds a reminder's call outlives its handlings before it may be deleted unanswered.
KEEP_AFTER = 60.0

_SET = (
    "INSERT INTO reminders (agent, key, name, payload, next_at, every, generation, within, "
    "attempts, created_at, fired_at) VALUES (?, ?, ?, ?, ?, ?{float}, 1, ?, ?, ?, NULL) "
    "ON CONFLICT (agent, key, name) DO UPDATE SET payload = excluded.payload, "
    "next_at = excluded.next_at, every = excluded.every, "
    "generation = reminders.generation + 1, within = excluded.within, "
    "attempts = excluded.attempts, fired_at = NULL"
)
_FORGET = "DELETE FROM reminders WHERE agent = ? AND key = ? AND name = ? RETURNING 1"
_COLUMNS = "agent, key, name, payload, next_at, every, generation, fired_at"
_DUE = (
    f"SELECT {_COLUMNS}, within, attempts FROM reminders WHERE next_at <= ? "
    "ORDER BY next_at LIMIT ?{for_update}"
)
_MOVE = (
    "UPDATE reminders SET next_at = ?, fired_at = ? WHERE agent = ? AND key = ? AND name = ? "
    "AND generation = ?"
)
_DONE = "DELETE FROM reminders WHERE agent = ? AND key = ? AND name = ? AND generation = ?"
_NEXT = "SELECT min(next_at) FROM reminders"


def _call_into(pending: str) -> str:
    """The INSERT of a tick's call, queued where `pending` holds, once per call id."""
    return (
        "INSERT INTO calls (call_id, agent, payload, within, attempts, max_attempts, visible_at, "
        "created_at, expires_at, owner_key, resolution, reminder, reminder_at) "
        f"SELECT ?, ?, ?, ?{{float}}, 0, ?{{int}}, ?, ?, ?, ?, NULL, ?, ? WHERE {pending} "
        "ON CONFLICT (call_id) DO NOTHING RETURNING 1"
    )


#: A periodic reminder's tick waits for none of its calls to be unanswered.
_PERIODIC = _call_into(
    "NOT EXISTS (SELECT 1 FROM calls WHERE agent = ? AND owner_key = ? AND reminder = ? "
    "AND answered_at IS NULL AND expires_at > ?)"
)
_ONCE = _call_into("1 = 1")
_LIST = f"SELECT {_COLUMNS} FROM reminders"


def set_reminders(batch: Writing, ops: Sequence[SetReminder]) -> Plan[list[object]]:
    """Store (or replace) each reminder whose payload encodes; the encoding error is its caller's."""
    d, now = batch.dialect, batch.now
    out: list[object] = []
    queries = []
    for op in ops:
        payload = batch.encode(op.payload)
        if isinstance(payload, Exception):
            out.append(payload)
            continue
        due = d.stored(op.at) if op.at is not None else d.later(now, op.delay or 0.0)
        params = (op.agent, op.key, op.name, payload, due, op.every, op.within, op.attempts, now)
        queries.append(Query(d.sql(_SET), params, rows=False))
        out.append(None)
    if queries:
        yield queries
    return out


def forget(batch: Writing, ops: Sequence[ForgetReminder]) -> Plan[list[object]]:
    """Delete each reminder; whether it existed."""
    sql = batch.dialect.sql(_FORGET)
    found = yield [Query(sql, (op.agent, op.key, op.name)) for op in ops]
    return [bool(rows) for rows in found]


def fire_reminders(batch: Writing, ops: Sequence[FireReminders]) -> Plan[list[object]]:
    """Fire each operation's due reminders; (calls queued, the next tick) for each."""
    d, now = batch.dialect, batch.now
    at = d.instant(now)
    out: list[object] = []
    for op in ops:
        queued = 0
        for row in (yield from one(d.sql(_DUE), (now, op.limit))) if op.limit > 0 else []:
            reminder = _reminder(d, row)
            firing = fire(reminder, now=at)
            if firing is None:  # not due after all (rounding of the stored instant)
                continue
            r = reminder
            who = (r.agent, r.key, r.name, r.generation)
            if firing.next_at is None:
                move = Query(d.sql(_DONE), who, rows=False)
            else:
                move = Query(d.sql(_MOVE), (d.stored(firing.next_at), now, *who), rows=False)
            within, attempts = float(row[8]), int(row[9])
            call = (
                tick_call_id(*who, firing.tick),
                r.agent,
                row[3],
                within,
                attempts,
                now,
                now,
                d.later(now, (within + 1.0) * attempts + KEEP_AFTER),
                r.key,
                r.name,
                d.stored(firing.tick),
            )
            if r.every is None:
                insert = Query(d.sql(_ONCE), call)
            else:
                insert = Query(d.sql(_PERIODIC), (*call, r.agent, r.key, r.name, now))
            _, inserted = yield [move, insert]
            queued += len(inserted)
        out.append((queued, (yield from next_reminder(d))))
        if queued:
            batch.rings.add(ch.CALLS)
    return out


def _reminder(d: Dialect, row: Sequence[Any]) -> Reminder:
    agent, key, name, payload, next_at, every, generation, fired_at = row[:8]
    return Reminder(
        agent=str(agent),
        key=str(key),
        name=str(name),
        payload=loads(str(payload)),
        next_at=d.instant(next_at),
        every=None if every is None else float(every),
        generation=int(generation),
        fired_at=None if fired_at is None else d.instant(fired_at),
    )


def next_reminder(d: Dialect) -> Plan[datetime | None]:
    """The earliest next tick of any reminder, or None."""
    row = yield from first(d.sql(_NEXT))
    return None if row is None or row[0] is None else d.instant(row[0])


def list_reminders(d: Dialect, op: ListReminders) -> Plan[list[Reminder]]:
    """The reminders of `op.agent` (and `op.key`), or all, by agent, key and name."""
    where: list[str] = []
    params: list[object] = []
    for column, value in (("agent", op.agent), ("key", op.key)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = _LIST + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY agent, key, name"
    return [_reminder(d, row) for row in (yield from one(d.sql(sql), params))]
