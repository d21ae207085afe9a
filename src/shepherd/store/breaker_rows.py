"""The shared circuit breakers, for both backends: rows to records, and one step each.

A backend locks the breaker's row, hands it to `allow_step` or `report_step`
(which apply `shepherd.core.breaker` on the store's clock), then writes back the
new row and, when the state changed, the event this returns, in the same
transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shepherd.core.breaker import (
    Breaker,
    BreakerEvent,
    BreakerPolicy,
    BreakerState,
    Decision,
    allow,
    change_detail,
    record_failure,
    record_success,
)
from shepherd.payloads import dumps_detail
from shepherd.store.rows import Instant, load

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "BREAKER_COLUMNS",
    "BREAKER_EVENT_COLUMNS",
    "Step",
    "allow_step",
    "breaker_event_from_row",
    "breaker_from_row",
    "report_step",
]

BREAKER_COLUMNS = (
    "service, state, consecutive_failures, window_started_at, window_calls, window_failures, "
    "opened_at, probe_started_at, version"
)
BREAKER_EVENT_COLUMNS = "id, service, from_state, to_state, detail, at"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """What one operation on a breaker changes.

    Attributes:
        old: The breaker as stored before the operation.
        new: The breaker to store (`old` itself when nothing changed).
        event: The event's detail as JSON text when the change is recorded, else None.
    """

    old: Breaker
    new: Breaker
    event: str | None

    @property
    def changed(self) -> bool:
        """Whether the row must be written."""
        return self.new != self.old


def breaker_from_row(row: tuple[Any, ...] | None, service: str, instant: Instant) -> Breaker:
    """A Breaker from a row of BREAKER_COLUMNS; a closed one when there is no row."""
    if row is None:
        return Breaker(service=service)
    return Breaker(
        service=row[0],
        state=BreakerState(row[1]),
        consecutive_failures=row[2],
        window_started_at=None if row[3] is None else instant(row[3]),
        window_calls=row[4],
        window_failures=row[5],
        opened_at=None if row[6] is None else instant(row[6]),
        probe_started_at=None if row[7] is None else instant(row[7]),
        version=row[8],
    )


def breaker_event_from_row(row: tuple[Any, ...], instant: Instant) -> BreakerEvent:
    """A BreakerEvent from a row of BREAKER_EVENT_COLUMNS."""
    return BreakerEvent(
        id=row[0],
        service=row[1],
        from_state=BreakerState(row[2]),
        to_state=BreakerState(row[3]),
        detail=load(row[4]),
        at=instant(row[5]),
    )


def allow_step(old: Breaker, policy: BreakerPolicy, now: datetime) -> tuple[Step, Decision]:
    """`core.breaker.allow` on the stored breaker, with the event to record."""
    new, decision = allow(old, policy, now=now)
    return _step(old, new, policy), decision


def report_step(old: Breaker, policy: BreakerPolicy, now: datetime, *, failed: bool) -> Step:
    """`record_failure` or `record_success` on the stored breaker, with the event."""
    record = record_failure if failed else record_success
    return _step(old, record(old, policy, now=now), policy)


def _step(old: Breaker, new: Breaker, policy: BreakerPolicy) -> Step:
    detail = change_detail(old, new, policy)
    return Step(old=old, new=new, event=None if detail is None else dumps_detail(detail))
