"""Batch handlers for the shared circuit breakers.

Each operation makes sure its service's row exists, locks it (`FOR UPDATE`), so
that concurrent processes take turns, applies `shepherd.core.breaker` through
`store.breaker_rows` on the batch's (database) clock, and writes the new row
and, on a change of state, its event; `BREAKERS` is NOTIFYd at commit. Rows are
locked in service order, so two batches never wait for each other in a cycle.
"""

from __future__ import annotations

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import limit_of, utc

if TYPE_CHECKING:
    from shepherd.core.breaker import BreakerEvent
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["allow", "report"]

_ENSURE = (
    "INSERT INTO breakers (service, state, updated_at) VALUES (%s, 'closed', %s) "
    "ON CONFLICT (service) DO NOTHING"
)
_LOCK = f"SELECT {shared.BREAKER_COLUMNS} FROM breakers WHERE service = %s FOR UPDATE"
_UPDATE = (
    "UPDATE breakers SET state = %s, consecutive_failures = %s, window_started_at = %s, "
    "window_calls = %s, window_failures = %s, opened_at = %s, probe_started_at = %s, "
    "version = %s, updated_at = %s WHERE service = %s"
)
_EVENT = (
    "INSERT INTO breaker_events (service, from_state, to_state, detail, at) "
    "VALUES (%s, %s, %s, %s, %s)"
)


async def _locked(batch: PostgresBatch, service: str) -> Breaker:
    await batch.send(_ENSURE, (service, batch.now))
    row = await (await batch.send(_LOCK, (service,))).fetchone()
    assert row is not None  # ensured above, and locked
    return shared.breaker_from_row(row, utc)


async def _save(batch: PostgresBatch, step: shared.Step) -> None:
    b = step.new
    if step.changed:
        await batch.send(_UPDATE, (*shared.breaker_fields(b, utc), batch.now, b.service))
    if step.event is not None:
        await batch.send(
            _EVENT, (b.service, str(step.old.state), str(b.state), step.event, batch.now)
        )
        batch.rings.add(ch.BREAKERS)


def _by_service(services: Sequence[str]) -> list[int]:
    """Item indexes in service order (stable): the order rows are locked in."""
    return sorted(range(len(services)), key=lambda i: services[i])


@WRITES.handles(BreakerAllow)
async def allow(batch: PostgresBatch, ops: Sequence[BreakerAllow]) -> list[object]:
    """Apply `allow` to each locked breaker: one probe per cool-down in the cluster."""
    out: list[object] = [None] * len(ops)
    for i in _by_service([op.service for op in ops]):
        service, policy = ops[i].service, ops[i].policy
        step, decision = shared.allow_step(await _locked(batch, service), policy, batch.now)
        await _save(batch, step)
        out[i] = (step.new, decision)
    return out


@WRITES.handles(BreakerReport)
async def report(batch: PostgresBatch, ops: Sequence[BreakerReport]) -> list[object]:
    """Count each call's outcome on its locked breaker."""
    out: list[object] = [None] * len(ops)
    for i in _by_service([op.service for op in ops]):
        service, policy, failed = ops[i].service, ops[i].policy, ops[i].failed
        step = shared.report_step(await _locked(batch, service), policy, batch.now, failed=failed)
        await _save(batch, step)
        out[i] = (step.old, step.new)
    return out


# -- reads ---------------------------------------------------------------------
_GET = f"SELECT {shared.BREAKER_COLUMNS} FROM breakers WHERE service = %s"
_LIST = f"SELECT {shared.BREAKER_COLUMNS} FROM breakers ORDER BY service"
_ALL_EVENTS = f"SELECT {shared.BREAKER_EVENT_COLUMNS} FROM breaker_events ORDER BY id DESC LIMIT %s"
_EVENTS_FOR = (
    f"SELECT {shared.BREAKER_EVENT_COLUMNS} FROM breaker_events WHERE service = %s "
    "ORDER BY id DESC LIMIT %s"
)


@READS.handles(GetBreaker)
async def get_breaker(reader: Reader, op: GetBreaker) -> Breaker | None:
    """The stored breaker of `service`, or None if it was never used."""
    rows = await reader.fetch(_GET, (op.service,))
    return shared.breaker_from_row(rows[0], utc) if rows else None


@READS.handles(ListBreakers)
async def list_breakers(reader: Reader, op: ListBreakers) -> list[Breaker]:
    """Every stored breaker, by service name."""
    return [shared.breaker_from_row(r, utc) for r in await reader.fetch(_LIST)]


@READS.handles(BreakerEvents)
async def breaker_events(reader: Reader, op: BreakerEvents) -> list[BreakerEvent]:
    """The latest breaker changes, newest first: of every service, or of `service`."""
    if op.service is None:
        rows = await reader.fetch(_ALL_EVENTS, (limit_of(op.limit),))
    else:
        rows = await reader.fetch(_EVENTS_FOR, (op.service, limit_of(op.limit)))
    return [shared.breaker_event_from_row(r, utc) for r in rows]


_LATEST = (
    f"SELECT {shared.BREAKER_EVENT_COLUMNS} FROM breaker_events WHERE id IN "
    "(SELECT max(id) FROM breaker_events WHERE service = ANY(%s::text[]) GROUP BY service)"
)


@READS.handles(LatestBreakerEvents)
async def latest_breaker_events(reader: Reader, op: LatestBreakerEvents) -> dict[str, BreakerEvent]:
    """The latest change of each of `op.services` that has one, by service."""
    rows = await reader.fetch(_LATEST, (list(op.services),))
    events = (shared.breaker_event_from_row(row, utc) for row in rows)
    return {event.service: event for event in events}
