"""SQLite batch handlers: the shared circuit breakers.

Each handler runs inside the store's group-commit transaction:
`handler(store, conn, items, now, rings) -> list[object]` returns one outcome per
item (a value, or an exception that only that item's caller sees). The
transaction began with BEGIN IMMEDIATE, so it holds the database's write lock:
no other process changes a breaker between our read and our write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shepherd.store import signals as ch
from shepherd.store.breaker_rows import (
    BREAKER_COLUMNS,
    Step,
    allow_step,
    breaker_from_row,
    report_step,
)
from shepherd.store.rows import unix_instant

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerPolicy
    from shepherd.store.sqlite import SQLiteStore

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

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


def _ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _load(conn: sqlite3.Connection, service: str) -> tuple[Breaker, bool]:
    row = conn.execute(_SELECT, (service,)).fetchone()
    return breaker_from_row(row, service, unix_instant), row is not None


def _save(
    conn: sqlite3.Connection, step: Step, now: float, rings: set[str], *, stored: bool
) -> None:
    b = step.new
    if step.changed or not stored:
        # A breaker used for the first time gets its row, so `shepherd breakers` lists it.
        conn.execute(
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
                now,
            ),
        )
    if step.event is not None:
        conn.execute(_EVENT, (b.service, str(step.old.state), str(b.state), step.event, now))
        rings.add(ch.BREAKERS)


def breaker_allow(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, BreakerPolicy]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Apply `allow` to each stored breaker, in order: one probe per cool-down."""
    out: list[object] = []
    for service, policy in items:
        old, stored = _load(conn, service)
        step, decision = allow_step(old, policy, unix_instant(now))
        _save(conn, step, now, rings, stored=stored)
        out.append((step.new, decision))
    return out


def breaker_report(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, BreakerPolicy, bool]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Count each call's outcome on its stored breaker, in order."""
    out: list[object] = []
    for service, policy, failed in items:
        old, stored = _load(conn, service)
        step = report_step(old, policy, unix_instant(now), failed=failed)
        _save(conn, step, now, rings, stored=stored)
        out.append((step.old, step.new))
    return out


#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {
    "breaker_allow": breaker_allow,
    "breaker_report": breaker_report,
}
