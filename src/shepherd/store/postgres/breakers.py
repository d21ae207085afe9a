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

from shepherd.store import signals as ch
from shepherd.store.breaker_rows import (
    BREAKER_COLUMNS,
    Step,
    allow_step,
    breaker_from_row,
    report_step,
)
from shepherd.store.postgres.rows import utc

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerPolicy
    from shepherd.store.postgres.batch import Batch

__all__ = ["allow", "report"]

_ENSURE = (
    "INSERT INTO breakers (service, state, updated_at) VALUES (%s, 'closed', %s) "
    "ON CONFLICT (service) DO NOTHING"
)
_LOCK = f"SELECT {BREAKER_COLUMNS} FROM breakers WHERE service = %s FOR UPDATE"
_UPDATE = (
    "UPDATE breakers SET state = %s, consecutive_failures = %s, window_started_at = %s, "
    "window_calls = %s, window_failures = %s, opened_at = %s, probe_started_at = %s, "
    "version = %s, updated_at = %s WHERE service = %s"
)
_EVENT = (
    "INSERT INTO breaker_events (service, from_state, to_state, detail, at) "
    "VALUES (%s, %s, %s, %s, %s)"
)


async def _locked(batch: Batch, service: str) -> Breaker:
    await batch.send(_ENSURE, (service, batch.now))
    cursor = await batch.send(_LOCK, (service,))
    return breaker_from_row(await cursor.fetchone(), service, utc)


async def _save(batch: Batch, step: Step) -> None:
    b = step.new
    if step.changed:
        await batch.send(
            _UPDATE,
            (
                str(b.state),
                b.consecutive_failures,
                b.window_started_at,
                b.window_calls,
                b.window_failures,
                b.opened_at,
                b.probe_started_at,
                b.version,
                batch.now,
                b.service,
            ),
        )
    if step.event is not None:
        await batch.send(
            _EVENT, (b.service, str(step.old.state), str(b.state), step.event, batch.now)
        )
        batch.rings.add(ch.BREAKERS)


def _by_service(services: Sequence[str]) -> list[int]:
    """Item indexes in service order (stable): the order rows are locked in."""
    return sorted(range(len(services)), key=lambda i: services[i])


async def allow(batch: Batch, items: Sequence[tuple[str, BreakerPolicy]]) -> list[object]:
    """Apply `allow` to each locked breaker: one probe per cool-down in the cluster."""
    out: list[object] = [None] * len(items)
    for i in _by_service([service for service, _ in items]):
        service, policy = items[i]
        step, decision = allow_step(await _locked(batch, service), policy, batch.now)
        await _save(batch, step)
        out[i] = (step.new, decision)
    return out


async def report(batch: Batch, items: Sequence[tuple[str, BreakerPolicy, bool]]) -> list[object]:
    """Count each call's outcome on its locked breaker."""
    out: list[object] = [None] * len(items)
    for i in _by_service([service for service, _, _ in items]):
        service, policy, failed = items[i]
        step = report_step(await _locked(batch, service), policy, batch.now, failed=failed)
        await _save(batch, step)
        out[i] = (step.old, step.new)
    return out
