"""Operator alerts as stored: listed, and acknowledged by an operator.

An alert row is written by the write that moves its task into `error`
(`apply_supervision`, `apply_crash`, `fail_task`), in its transaction.
"""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.core.alerts import StoredAlert
from shepherd.store.alert_rows import checked_alert_id, checked_by, checked_limit
from shepherd.store.ops.base import Read, Runs, Write, operation

__all__ = ["AcknowledgeAlert", "Alerts", "ListAlerts"]


@operation
class ListAlerts(Read[list[StoredAlert]]):
    """At most `limit` stored alerts (only those not acknowledged, if `open_only`; only
    those of `task_id`, if given), newest first.

    An alert is stored by the write that moves its task into `error` (a
    supervisor's escalation, a crash verdict's quarantine, an owner's failure
    into `error`), in that write's transaction, and only when the write took
    place: a fenced-off write stores none. Its `reason` and `failure_count`
    are those the alert sinks are sent.

    Raises:
        ConfigError: `limit` is not a whole number of at least 1.
    """

    _: KW_ONLY
    open_only: bool = False
    limit: int = 100
    task_id: str | None = None


@operation
class AcknowledgeAlert(Write[StoredAlert]):
    """Acknowledge an alert (now, store clock, by `by`); the alert as stored.

    An alert acknowledged already keeps its first acknowledgement, which is
    returned. Bad input changes nothing.

    Raises:
        UnknownAlertError: No alert has that id.
        ConfigError: `by` is empty (or not a str, too long, or holds a
            control character), or `alert_id` is not a whole number.
    """

    alert_id: int
    _: KW_ONLY
    by: str


class Alerts(Runs):
    """The store's methods for stored alerts (inputs checked before anything is queued)."""

    async def list_alerts(
        self, *, open_only: bool = False, limit: int = 100, task_id: str | None = None
    ) -> list[StoredAlert]:
        """`ListAlerts`."""
        return await self.read(
            ListAlerts(open_only=open_only, limit=checked_limit(limit), task_id=task_id)
        )

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """`AcknowledgeAlert`."""
        return await self.write(AcknowledgeAlert(checked_alert_id(alert_id), by=checked_by(by)))
