"""Circuit breakers: one row per remote service, shared by every agent process.

`breaker_allow` and `breaker_report` lock the row, apply `shepherd.core.breaker`
on the store's clock and write the result, so only one caller in the whole
cluster is given a `Probe` per cool-down; every change of state writes a
breaker event in the same transaction and rings `signals.BREAKERS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
from shepherd.core.breaker import Decision as BreakerDecision
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "BreakerAllow",
    "BreakerEvents",
    "BreakerReport",
    "Breakers",
    "GetBreaker",
    "LatestBreakerEvents",
    "ListBreakers",
]


@operation
class BreakerAllow(Write[tuple[Breaker, BreakerDecision]]):
    """May a call to `service` be made now? `core.breaker.allow` on the stored breaker.

    A missing breaker is closed. A `Probe` (open -> half-open) is written
    before this returns, so concurrent callers in any process see it and get
    `Wait`. Returns the breaker after the decision, and the decision.
    """

    service: str
    policy: BreakerPolicy


@operation
class BreakerReport(Write[tuple[Breaker, Breaker]]):
    """Count a call's outcome (`record_failure` or `record_success`).

    Returns the breaker just before this report and just after it, so the
    caller can tell which change it made (another process may have changed
    the breaker since the caller last looked).
    """

    service: str
    policy: BreakerPolicy
    _: KW_ONLY
    failed: bool


@operation
class GetBreaker(Read[Breaker | None]):
    """The stored breaker of `service`, or None if it was never used."""

    service: str


@operation
class ListBreakers(Read[list[Breaker]]):
    """Every stored breaker, by service name."""


@operation
class BreakerEvents(Read[list[BreakerEvent]]):
    """The latest breaker state changes (of one service, or all), newest first."""

    _: KW_ONLY
    service: str | None = None
    limit: int = 50


@operation
class LatestBreakerEvents(Read[dict[str, BreakerEvent]]):
    """The latest state change of each of `services`, by service (those without one are absent).

    One read for a listing of breakers, however many it shows.
    """

    services: Sequence[str]


class Breakers(Runs):
    """The store's methods for circuit breakers."""

    breaker_allow = method(BreakerAllow)
    breaker_report = method(BreakerReport)
    get_breaker = method(GetBreaker)
    list_breakers = method(ListBreakers)
    breaker_events = method(BreakerEvents)
    latest_breaker_events = method(LatestBreakerEvents)
