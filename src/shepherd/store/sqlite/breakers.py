"""Batch handlers and reads for the shared circuit breakers.

A handler reads a breaker's row and writes it back under the transaction's
write lock (BEGIN IMMEDIATE): no other process changes a breaker between our
read and our write. The decisions are `shepherd.store.breaker_rows`' (the
core's breaker on the store's clock).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.breaker import Breaker
from shepherd.store import breaker_rows as shared
from shepherd.store import signals as ch
from shepherd.store.ops import (
    BreakerAllow,
    BreakerEvents,
    BreakerReport,
    GetBreaker,
    LatestBreakerEvents,
    ListBreakers,
)
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import chunks, ts

if TYPE_CHECKING:
    from shepherd.core.breaker import BreakerEvent
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = [
    "allow",
    "breaker_events",
    "get_breaker",
    "latest_breaker_events",
    "list_breakers",
    "report",
]

_SELECT = f"SELECT {shared.BREAKER_COLUMNS} FROM breakers WHERE service = ?"
_UPSERT = (
    "INSERT INTO breakers (service, state, consecutive_failures, window_started_at, "
    "window_calls, window_failures, opened_at, probe_started_at, version, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (service) DO UPDATE SET "
    "state = excluded.state, consecutive_failures = excluded.consecutive_failures, "
    "window_started_at = excluded.window_started_at, window_calls = excluded.window_calls, "
    "window_failures = excluded.window_failures, opened_at = excluded.opened_at, "
    "probe_started_at = excluded.probe_started_at, version = excluded.version, "
    "updated_at = excluded.updated_at"
)
_EVENT = (
    "INSERT INTO breaker_events (service, from_state, to_state, detail, at) VALUES (?, ?, ?, ?, ?)"
)
_LIST = f"SELECT {shared.BREAKER_COLUMNS} FROM breakers ORDER BY service"
_EVENTS = (
    f"SELECT {shared.BREAKER_EVENT_COLUMNS} FROM breaker_events {{where}}ORDER BY id DESC LIMIT ?"
)


def _load(conn: sqlite3.Connection, service: str) -> tuple[Breaker, bool]:
    row = conn.execute(_SELECT, (service,)).fetchone()
    if row is None:
        return Breaker(service=service), False  # closed, as a breaker never used is
    return shared.breaker_from_row(row, unix_instant), True


def _save(batch: SqliteBatch, step: shared.Step, *, stored: bool) -> None:
    b = step.new
    if step.changed or not stored:
        # A breaker used for the first time gets its row, so `shepherd breakers` lists it.
        batch.conn.execute(_UPSERT, (b.service, *shared.breaker_fields(b, ts), batch.now))
    if step.event is not None:
        batch.conn.execute(
            _EVENT, (b.service, str(step.old.state), str(b.state), step.event, batch.now)
        )
        batch.rings.add(ch.BREAKERS)


@WRITES.handles(BreakerAllow)
def allow(batch: SqliteBatch, ops: Sequence[BreakerAllow]) -> list[object]:
    """Apply `allow` to each stored breaker, in order: one probe per cool-down."""
    out: list[object] = []
    for op in ops:
        service, policy = op.service, op.policy
        old, stored = _load(batch.conn, service)
        step, decision = shared.allow_step(old, policy, unix_instant(batch.now))
        _save(batch, step, stored=stored)
        out.append((step.new, decision))
    return out


@WRITES.handles(BreakerReport)
def report(batch: SqliteBatch, ops: Sequence[BreakerReport]) -> list[object]:
    """Count each call's outcome on its stored breaker, in order."""
    out: list[object] = []
    for op in ops:
        service, policy, failed = op.service, op.policy, op.failed
        old, stored = _load(batch.conn, service)
        step = shared.report_step(old, policy, unix_instant(batch.now), failed=failed)
        _save(batch, step, stored=stored)
        out.append((step.old, step.new))
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(GetBreaker)
def get_breaker(at: Reading, op: GetBreaker) -> Breaker | None:
    """The stored breaker of `service`, or None if it was never used."""
    breaker, stored = _load(at.conn, op.service)
    return breaker if stored else None


@READS.handles(ListBreakers)
def list_breakers(at: Reading, op: ListBreakers) -> list[Breaker]:
    """Every stored breaker, by service name."""
    rows = at.conn.execute(_LIST).fetchall()
    return [shared.breaker_from_row(r, unix_instant) for r in rows]


@READS.handles(BreakerEvents)
def breaker_events(at: Reading, op: BreakerEvents) -> list[BreakerEvent]:
    """The latest breaker changes, newest first: of every service, or of `service`."""
    conn = at.conn
    service, limit = op.service, op.limit
    where, params = ("", ()) if service is None else ("WHERE service = ? ", (service,))
    rows = conn.execute(_EVENTS.format(where=where), (*params, limit)).fetchall()
    return [shared.breaker_event_from_row(r, unix_instant) for r in rows]


_LATEST = (
    f"SELECT {shared.BREAKER_EVENT_COLUMNS} FROM breaker_events WHERE id IN "
    "(SELECT max(id) FROM breaker_events WHERE service IN ({marks}) GROUP BY service)"
)


@READS.handles(LatestBreakerEvents)
def latest_breaker_events(at: Reading, op: LatestBreakerEvents) -> dict[str, BreakerEvent]:
    """The latest change of each of `op.services` that has one, by service."""
    latest: dict[str, BreakerEvent] = {}
    for chunk in chunks(list(op.services)):
        rows = at.conn.execute(_LATEST.format(marks=",".join("?" * len(chunk))), chunk)
        events = (shared.breaker_event_from_row(row, unix_instant) for row in rows)
        latest.update((event.service, event) for event in events)
    return latest
