"""Stored operator alerts as rows, for both backends; and the checks before an operator's read or write.

An alert row is inserted by the write that moves its task into `error`, in
its transaction (`INSERT_COLUMNS`, in that order). Every input of
`list_alerts`, `count_alerts` and `acknowledge_alert` is checked here, by the
facade, before an operation is queued: a refused one raises a `ShepherdError`
naming what was wrong, and nothing is read or written.
"""

from __future__ import annotations

from typing import ClassVar

from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.core.limits import NAME_BYTES, too_long
from shepherd.errors import ConfigError, TooLongError, UnknownAlertError
from shepherd.store.rows import Columns, Instant, Row

__all__ = [
    "ALERT_COLUMNS",
    "INSERT_COLUMNS",
    "AlertCol",
    "alert_from_row",
    "checked_alert_id",
    "checked_by",
    "checked_cursor",
    "checked_limit",
    "checked_state",
]

#: The largest id either backend can store (a signed 64-bit integer).
_MAX_ID = 2**63 - 1
#: The columns an alert is inserted with, in this order.
INSERT_COLUMNS = "task_id, workflow, key, reason, failure_count, raised_at"


class AlertCol(Columns):
    """A row of ALERT_COLUMNS."""

    ID: ClassVar[int]
    TASK_ID: ClassVar[int]
    WORKFLOW: ClassVar[int]
    KEY: ClassVar[int]
    REASON: ClassVar[int]
    FAILURE_COUNT: ClassVar[int]
    RAISED_AT: ClassVar[int]
    ACKNOWLEDGED_AT: ClassVar[int]
    ACKNOWLEDGED_BY: ClassVar[int]
    STATE: ClassVar[int]
    TIMES_RAISED: ClassVar[int]
    LAST_RAISED_AT: ClassVar[int]
    RESOLVED_AT: ClassVar[int]
    RESOLVED_BY: ClassVar[int]


ALERT_COLUMNS = AlertCol.select()


def alert_from_row(row: Row, instant: Instant) -> StoredAlert:
    """A StoredAlert from a row of ALERT_COLUMNS (`instant`: the backend's time column to UTC)."""
    (
        alert_id,
        task_id,
        workflow,
        key,
        reason,
        failure_count,
        raised_at,
        acked_at,
        acked_by,
        state,
        times_raised,
        last_raised_at,
        resolved_at,
        resolved_by,
    ) = row
    return StoredAlert(
        id=int(alert_id),
        task_id=task_id,
        workflow=workflow,
        key=key,
        reason=reason,
        failure_count=int(failure_count),
        raised_at=instant(raised_at),
        acknowledged_at=None if acked_at is None else instant(acked_at),
        acknowledged_by=acked_by,
        state=AlertState(state),
        times_raised=int(times_raised),
        last_raised_at=None if last_raised_at is None else instant(last_raised_at),
        resolved_at=None if resolved_at is None else instant(resolved_at),
        resolved_by=resolved_by,
    )


def checked_alert_id(alert_id: object) -> int:
    """`alert_id` if it can be an alert's id.

    Raises:
        ConfigError: It is not a whole number (field `alert_id`).
        UnknownAlertError: It is a whole number no alert can have (below 1, or
            past what the store can hold).
    """
    if isinstance(alert_id, bool) or not isinstance(alert_id, int):
        raise ConfigError("alert_id", f"an alert's id is a whole number, not {alert_id!r}")
    if not 1 <= alert_id <= _MAX_ID:
        raise UnknownAlertError(alert_id)
    return alert_id


def checked_by(by: object) -> str:
    """Who acknowledges an alert, as stored: `by` without surrounding spaces.

    Raises:
        ConfigError: `by` is not a str, is empty (or only spaces), is longer
            than NAME_BYTES of UTF-8, or holds a control character or a lone
            surrogate (field `by`).
    """
    if not isinstance(by, str):
        raise ConfigError("by", f"who acknowledges an alert is a str, not {type(by).__name__}")
    name = by.strip()
    if not name:
        raise ConfigError("by", "an acknowledgement must say who acknowledges it: 'by' is empty")
    if (problem := too_long("by", name, NAME_BYTES)) is not None:
        raise TooLongError("by", problem)
    if any(ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise ConfigError("by", f"{name!r} contains a control character or a lone surrogate")
    return name


def checked_limit(limit: object) -> int:
    """`limit` if it is a whole number of at least 1 (capped at what a store's LIMIT takes).

    Raises:
        ConfigError: It is not (field `limit`).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigError("limit", f"must be a whole number of at least 1, not {limit!r}")
    return min(limit, _MAX_ID)


def checked_state(state: object) -> AlertState | None:
    """`state` as an AlertState (None: every state).

    Raises:
        ConfigError: It is not one of the states, nor `all` (field `state`).
    """
    if state is None or state == "all":
        return None
    if isinstance(state, str):
        try:
            return AlertState(state)
        except ValueError:
            pass
    choices = ", ".join(s.value for s in AlertState)
    raise ConfigError("state", f"an alert's state is one of {choices} or all, not {state!r}")


def checked_cursor(value: object, field: str) -> int | None:
    """A page cursor (an alert's id), if it can be one; None stays None.

    Raises:
        ConfigError: It is not a whole number of at least 1 within what the
            store holds (field `field`).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_ID:
        raise ConfigError(
            field, f"a page's cursor is an alert's id (a whole number), not {value!r}"
        )
    return value
