"""The shared circuit breakers, for both backends: rows to records, and one step each.

A backend locks the breaker's row, hands it to `allow_step` or `report_step`
(which apply `shepherd.core.breaker` on the store's clock), then writes back the
new row and, when the state changed, the event this returns, in the same
transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

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
from shepherd.store.rows import Columns, Instant, Row, load

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "BREAKER_COLUMNS",
    "BREAKER_EVENT_COLUMNS",
    "BreakerCol",
    "BreakerEventCol",
    "Step",
    "allow_step",
    "breaker_event_from_row",
    "breaker_fields",
    "breaker_from_row",
    "report_step",
]

T = TypeVar("T")


class BreakerCol(Columns):
    """A row of BREAKER_COLUMNS."""

    SERVICE: ClassVar[int]
    STATE: ClassVar[int]
    CONSECUTIVE_FAILURES: ClassVar[int]
    WINDOW_STARTED_AT: ClassVar[int]
    WINDOW_CALLS: ClassVar[int]
    WINDOW_FAILURES: ClassVar[int]
    OPENED_AT: ClassVar[int]
    PROBE_STARTED_AT: ClassVar[int]
    VERSION: ClassVar[int]


BREAKER_COLUMNS = BreakerCol.select()


class BreakerEventCol(Columns):
    """A row of BREAKER_EVENT_COLUMNS."""

    ID: ClassVar[int]
    SERVICE: ClassVar[int]
    FROM_STATE: ClassVar[int]
    TO_STATE: ClassVar[int]
    DETAIL: ClassVar[int]
    AT: ClassVar[int]


BREAKER_EVENT_COLUMNS = BreakerEventCol.select()

# Stored states to their members, looked up on every row (cheaper than `BreakerState(value)`).
_STATES = {state.value: state for state in BreakerState}


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


def breaker_from_row(row: Row, instant: Instant) -> Breaker:
    """A Breaker from a row of BREAKER_COLUMNS."""

    def at(column: int) -> datetime | None:
        value = row[column]
        return None if value is None else instant(value)

    return Breaker(
        service=row[BreakerCol.SERVICE],
        state=_STATES[row[BreakerCol.STATE]],
        consecutive_failures=row[BreakerCol.CONSECUTIVE_FAILURES],
        window_started_at=at(BreakerCol.WINDOW_STARTED_AT),
        window_calls=row[BreakerCol.WINDOW_CALLS],
        window_failures=row[BreakerCol.WINDOW_FAILURES],
        opened_at=at(BreakerCol.OPENED_AT),
        probe_started_at=at(BreakerCol.PROBE_STARTED_AT),
        version=row[BreakerCol.VERSION],
    )


def breaker_fields(b: Breaker, stored: Callable[[datetime], T]) -> tuple[object, ...]:
    """The columns a step writes, in BREAKER_COLUMNS order after `service` (state ... version).

    Args:
        b: The breaker to store.
        stored: Turns an instant into the backend's time column.
    """

    def at(value: datetime | None) -> T | None:
        return None if value is None else stored(value)

    return (
        str(b.state),
        b.consecutive_failures,
        at(b.window_started_at),
        b.window_calls,
        b.window_failures,
        at(b.opened_at),
        at(b.probe_started_at),
        b.version,
    )


def breaker_event_from_row(row: Row, instant: Instant) -> BreakerEvent:
    """A BreakerEvent from a row of BREAKER_EVENT_COLUMNS."""
    event_id, service, from_state, to_state, detail, at = row
    return BreakerEvent(
        id=event_id,
        service=service,
        from_state=_STATES[from_state],
        to_state=_STATES[to_state],
        detail=load(detail),
        at=instant(at),
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
