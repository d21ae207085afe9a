"""Operator alerts as stored: listed, counted, acknowledged, and their resolutions announced.

An alert row is written by the write that moves its task into `error`
(`apply_supervision`, `apply_crash`, `fail_task`), in its transaction; a task
has at most one open alert, which a repeated failure updates. The write that
ends the task in any other state (`finish_task`, `fail_task` into
`compensated` or `cancelled`) resolves its alerts, in its transaction too. A
resolution waits in the store until the supervisor's leader has told the
alert sinks (`unsent_resolutions`, then `mark_resolutions_sent`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.errors import ConfigError
from shepherd.store.alert_rows import (
    checked_alert_id,
    checked_by,
    checked_cursor,
    checked_limit,
    checked_state,
)
from shepherd.store.ops.base import Read, Runs, Write, operation

__all__ = [
    "AcknowledgeAlert",
    "Alerts",
    "CountAlerts",
    "ListAlerts",
    "MarkResolutionsSent",
    "UnsentResolutions",
]


@operation
class ListAlerts(Read[list[StoredAlert]]):
    """At most `limit` stored alerts, newest first: only those in `state` and of
    `task_id`, if given; only those older than alert `before` (the next page), or
    the oldest ones newer than alert `after` (the previous page), if given.

    An alert is stored by the write that moves its task into `error` (a
    supervisor's escalation, a crash verdict's quarantine, an owner's failure
    into `error`), in that write's transaction, and only when the write took
    place: a fenced-off write stores none. Its `reason` and `failure_count`
    are those the alert sinks were last sent. A task has at most one open
    alert: a failure while it is open raises it again (`times_raised`).

    Raises:
        ConfigError: `limit` is not a whole number of at least 1, a cursor
            is not an alert's id, `state` is not a state, or both cursors are given.
    """

    _: KW_ONLY
    limit: int = 100
    task_id: str | None = None
    state: AlertState | None = None
    before: int | None = None
    after: int | None = None


@operation
class CountAlerts(Read[int]):
    """How many alerts are stored (only those in `state`, if given): the overview's true count."""

    _: KW_ONLY
    state: AlertState | None = None


@operation
class AcknowledgeAlert(Write[StoredAlert]):
    """Acknowledge an open alert (now, store clock, by `by`); the alert as stored.

    An alert acknowledged already keeps its first acknowledgement, and a
    resolved one stays as it is; either is returned. Bad input changes nothing.

    Raises:
        UnknownAlertError: No alert has that id.
        ConfigError: `by` is empty (or not a str, too long, or holds a
            control character), or `alert_id` is not a whole number.
    """

    alert_id: int
    _: KW_ONLY
    by: str


@operation
class UnsentResolutions(Read[list[StoredAlert]]):
    """At most `limit` resolved alerts whose resolution the sinks were not told yet, oldest first."""

    _: KW_ONLY
    limit: int = 100


@operation
class MarkResolutionsSent(Write[None]):
    """Record that the sinks were told of these alerts' resolutions (now, store clock).

    An alert marked already keeps its first mark; an unknown or unresolved id
    is left alone.
    """

    alert_ids: Sequence[int]


class Alerts(Runs):
    """The store's methods for stored alerts (inputs checked before anything is queued)."""

    async def list_alerts(
        self,
        *,
        open_only: bool = False,
        limit: int = 100,
        task_id: str | None = None,
        state: AlertState | str | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredAlert]:
        """`ListAlerts`; `open_only` is `state="open"`."""
        chosen = checked_state(state)
        if open_only:
            if chosen is not None and chosen is not AlertState.OPEN:
                raise ConfigError("state", f"open_only lists open alerts, not {chosen.value} ones")
            chosen = AlertState.OPEN
        older, newer = checked_cursor(before, "before"), checked_cursor(after, "after")
        if older is not None and newer is not None:
            raise ConfigError("after", "a page is before an alert or after one, not both")
        return await self.read(
            ListAlerts(
                limit=checked_limit(limit), task_id=task_id, state=chosen, before=older, after=newer
            )
        )

    async def count_alerts(self, *, state: AlertState | str | None = None) -> int:
        """`CountAlerts`."""
        return await self.read(CountAlerts(state=checked_state(state)))

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """`AcknowledgeAlert`."""
        return await self.write(AcknowledgeAlert(checked_alert_id(alert_id), by=checked_by(by)))

    async def unsent_resolutions(self, *, limit: int = 100) -> list[StoredAlert]:
        """`UnsentResolutions`."""
        return await self.read(UnsentResolutions(limit=checked_limit(limit)))

    async def mark_resolutions_sent(self, alert_ids: Sequence[int]) -> None:
        """`MarkResolutionsSent`."""
        await self.write(MarkResolutionsSent(tuple(alert_ids)))
