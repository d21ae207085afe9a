"""Batch handlers and reads for the shared circuit breakers.

A handler reads a breaker's row and writes it back under the transaction's
write lock (BEGIN IMMEDIATE): no other process changes a breaker between our
read and our write. The decisions are `shepherd.store.breaker_rows`' (the
core's breaker on the store's clock).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.store import signals as ch
from shepherd.store.breaker_rows import (
    BREAKER_COLUMNS,
    BREAKER_EVENT_COLUMNS,
    Step,
    allow_step,
    breaker_event_from_row,
    breaker_from_row,
    report_step,
)
from shepherd.store.ops import BreakerAllow, BreakerEvents, BreakerReport, GetBreaker, ListBreakers
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent
    from shepherd.store.sqlite.batch import Batch

__all__ = ["allow", "breaker_events", "get_breaker", "list_breakers", "report"]

_SELECT = f"SELECT {BREAKER_COLUMNS} FROM breakers WHERE service = ?"
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
_LIST = f"SELECT {BREAKER_COLUMNS} FROM breakers ORDER BY service"
_EVENTS = f"SELECT {BREAKER_EVENT_COLUMNS} FROM breaker_events {{where}}ORDER BY id DESC LIMIT ?"


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _load(conn: sqlite3.Connection, service: str) -> tuple[Breaker, bool]:
    row = conn.execute(_SELECT, (service,)).fetchone()
    return breaker_from_row(row, service, unix_instant), row is not None


def _save(batch: Batch, step: Step, *, stored: bool) -> None:
    b = step.new
    if step.changed or not stored:
        # A breaker used for the first time gets its row, so `shepherd breakers` lists it.
        batch.conn.execute(
            _UPSERT,
            (
                b.service,
                str(b.state),
                b.consecutive_failures,
                _ts(b.window_started_at),
                b.window_calls,
                b.window_failures,
                _ts(b.opened_at),
                _ts(b.probe_started_at),
                b.version,
                batch.now,
            ),
        )
    if step.event is not None:
        batch.conn.execute(
            _EVENT, (b.service, str(step.old.state), str(b.state), step.event, batch.now)
        )
        batch.rings.add(ch.BREAKERS)


@WRITES.handles(BreakerAllow)
def allow(batch: Batch, ops: Sequence[BreakerAllow]) -> list[object]:
    """Apply `allow` to each stored breaker, in order: one probe per cool-down."""
    out: list[object] = []
    for op in ops:
        service, policy = op.service, op.policy
        old, stored = _load(batch.conn, service)
        step, decision = allow_step(old, policy, unix_instant(batch.now))
        _save(batch, step, stored=stored)
        out.append((step.new, decision))
    return out


@WRITES.handles(BreakerReport)
def report(batch: Batch, ops: Sequence[BreakerReport]) -> list[object]:
    """Count each call's outcome on its stored breaker, in order."""
    out: list[object] = []
    for op in ops:
        service, policy, failed = op.service, op.policy, op.failed
        old, stored = _load(batch.conn, service)
        step = report_step(old, policy, unix_instant(batch.now), failed=failed)
        _save(batch, step, stored=stored)
        out.append((step.old, step.new))
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(GetBreaker)
def get_breaker(at: Reading, op: GetBreaker) -> Breaker | None:
    """The stored breaker of `service`, or None if it was never used."""
    conn = at.conn
    service = op.service
    row = conn.execute(_SELECT, (service,)).fetchone()
    return None if row is None else breaker_from_row(row, service, unix_instant)


@READS.handles(ListBreakers)
def list_breakers(at: Reading, op: ListBreakers) -> list[Breaker]:
    """Every stored breaker, by service name."""
    conn = at.conn
    rows = conn.execute(_LIST).fetchall()
    return [breaker_from_row(r, r["service"], unix_instant) for r in rows]


@READS.handles(BreakerEvents)
def breaker_events(at: Reading, op: BreakerEvents) -> list[BreakerEvent]:
    """The latest breaker changes, newest first: of every service, or of `service`."""
    conn = at.conn
    service, limit = op.service, op.limit
    where, params = ("", ()) if service is None else ("WHERE service = ? ", (service,))
    rows = conn.execute(_EVENTS.format(where=where), (*params, limit)).fetchall()
    return [breaker_event_from_row(r, unix_instant) for r in rows]
