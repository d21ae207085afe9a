"""What `shepherd breakers`, `workers`, `purge` and `alerts` print: fitted tables, or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

import click

from shepherd.cli.render import age, compact, plain, value, when
from shepherd.cli.tables import Column, echo_table, terminal_width
from shepherd.core.alerts import AlertState
from shepherd.core.breaker import Breaker, BreakerEvent, BreakerState
from shepherd.core.records import JsonValue
from shepherd.core.workers import Worker

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.operations import Purged

__all__ = [
    "BreakerRow",
    "acknowledged_json",
    "alerts_json",
    "breakers_json",
    "print_acknowledged",
    "print_alerts",
    "print_breakers",
    "print_purged",
    "print_workers",
    "purged_json",
    "workers_json",
]

_BREAKER_COLUMNS = (
    Column("service"),
    Column("state"),
    Column("failures", right=True),
    Column("window", "middle", drop=2),
    Column("opened_at", "middle", drop=0),
    Column("probe_at", "middle", drop=1),
)
_CHANGE_COLUMNS = (Column("at"), Column("service"), Column("change"), Column("detail", "wide"))
_ALERT_COLUMNS = (
    Column("id", right=True),
    Column("task"),
    Column("workflow", "middle", drop=4),
    Column("key", "middle", drop=5),
    Column("fails", "middle", drop=3, right=True),
    # How many times its task failed into `error` while it was open: shown from 2.
    Column("times", "middle", drop=2, right=True),
    Column("raised", "middle", drop=1),
    Column("state"),
    Column("by", "middle", drop=0),
    Column("reason", "wide"),
)
#: The instance names the host and the pid (`host:pid:suffix`); a role's name is never cut
#: (the roles wrap), and the agents, then the start, go under a row that does not fit.
_WORKER_COLUMNS = (
    Column("instance"),
    Column("state"),
    Column("last beat"),
    Column("started", below=True, drop=1),
    Column("roles", "wrap"),
    Column("agents", "wide", below=True),
)


class BreakerRow(NamedTuple):
    """A breaker, with its latest event when it is not closed (for the cool-down)."""

    breaker: Breaker
    latest: BreakerEvent | None

    @property
    def probe_at(self) -> datetime | None:
        """When a probe is next allowed: the end of the cool-down (None while closed).

        The cool-down is the one recorded with the breaker's latest change, i.e.
        the policy of the agent that opened it or let its probe through.
        """
        b = self.breaker
        since = b.opened_at if b.state is BreakerState.OPEN else b.probe_started_at
        detail = None if self.latest is None else self.latest.detail
        cool_down = detail.get("cool_down") if isinstance(detail, dict) else None
        if since is None or not isinstance(cool_down, int | float):
            return None
        return since + timedelta(seconds=cool_down)


def breakers_json(rows: Sequence[BreakerRow], events: Sequence[BreakerEvent]) -> JsonValue:
    """The breakers and the latest changes as one JSON object."""
    return {
        "breakers": [{**plain(row.breaker), "probe_at": value(row.probe_at)} for row in rows],
        "events": [plain(event) for event in events],
    }


def print_breakers(rows: Sequence[BreakerRow], events: Sequence[BreakerEvent]) -> None:
    """A table of breakers, one line per service, then the latest changes."""
    width = terminal_width()
    if not rows:
        click.echo("no breakers")
    else:
        lines = [
            (
                row.breaker.service,
                str(row.breaker.state),
                str(row.breaker.consecutive_failures),
                f"{row.breaker.window_failures}/{row.breaker.window_calls} failed",
                when(row.breaker.opened_at),
                when(row.probe_at),
            )
            for row in rows
        ]
        echo_table(_BREAKER_COLUMNS, lines, width)
    if not events:
        return
    click.echo()
    click.echo(click.style("latest changes", bold=True))
    changes = [
        (when(e.at), e.service, f"{e.from_state} -> {e.to_state}", compact(e.detail))
        for e in events
    ]
    echo_table(_CHANGE_COLUMNS, changes, width)


def workers_json(workers: Sequence[Worker], *, now: datetime, ttl: float) -> JsonValue:
    """The workers as a JSON array: their fields, their state and their last beat's age."""
    return [
        {
            **plain(w),
            "state": str(w.state(now=now, ttl=ttl)),
            "beat_age": round((now - w.beat_at).total_seconds(), 3),
        }
        for w in workers
    ]


def print_workers(workers: Sequence[Worker], *, now: datetime, ttl: float) -> None:
    """A table of worker processes, one row each, with their state at `now`.

    At 80 columns a row may take more than one line: its roles wrap, and its
    agents and start time go under it.
    """
    if not workers:
        click.echo("no workers")
        return
    rows = [
        (
            w.instance,
            str(w.state(now=now, ttl=ttl)),
            age(now - w.beat_at),
            when(w.started_at, today=now),
            ",".join(w.roles),
            ", ".join(w.agents),
        )
        for w in workers
    ]
    echo_table(_WORKER_COLUMNS, rows, terminal_width())


def purged_json(done: Purged, ended_before: datetime | None) -> JsonValue:
    """What `shepherd purge` deleted, as a JSON object."""
    return {
        "purged": done.tasks,
        "ended_before": None if ended_before is None else ended_before.isoformat(),
        "tombstones": done.tombstones,
    }


def print_purged(done: Purged, ended_before: datetime | None) -> None:
    """What `shepherd purge` deleted, in one line."""
    since = "" if ended_before is None else f" that ended before {when(ended_before)}"
    click.echo(
        f"purged {done.tasks} task{'' if done.tasks == 1 else 's'}{since}, "
        f"and {done.tombstones} expired key tombstone{'' if done.tombstones == 1 else 's'}"
    )


def alerts_json(alerts: Sequence[StoredAlert], *, more: bool) -> JsonValue:
    """`shepherd alerts --json`: the alerts, how many, and whether more matched than shown."""
    return {"alerts": [alert.to_json() for alert in alerts], "count": len(alerts), "more": more}


def print_alerts(alerts: Sequence[StoredAlert], *, now: datetime, more: bool) -> None:
    """A table of stored alerts, newest first, one line each, then how many were listed."""
    if not alerts:
        click.echo("no alerts")
        return
    rows = [
        (
            str(alert.id),
            alert.task_id,
            alert.workflow,
            alert.key or "",
            str(alert.failure_count),
            str(alert.times_raised) if alert.times_raised > 1 else "",
            age(now - alert.raised_at),
            alert.state.value,
            _by(alert),
            alert.reason,
        )
        for alert in alerts
    ]
    echo_table(_ALERT_COLUMNS, rows, terminal_width())
    count = f"{len(alerts)} alert{'' if len(alerts) == 1 else 's'}"
    click.echo(f"{count} shown (more match; raise --limit)" if more else count)


def _by(alert: StoredAlert) -> str:
    """Who acknowledged the alert, or what resolved it (`task processed`)."""
    if alert.state is AlertState.RESOLVED:
        return alert.resolved_by or ""
    return alert.acknowledged_by or ""


def acknowledged_json(alert: StoredAlert) -> JsonValue:
    """`shepherd alerts ack --json`: the alert as stored after the acknowledgement."""
    return {"acknowledged": alert.to_json()}


def print_acknowledged(alert: StoredAlert, *, by: str) -> None:
    """One line: who acknowledged the alert and when; says so when someone other than `by` had,
    or when it was resolved before anyone did."""
    if alert.acknowledged_by is None:
        click.echo(
            f"alert {alert.id} (task {alert.task_id}) was already resolved ({alert.resolved_by}) "
            f"at {when(alert.resolved_at)}: nothing to acknowledge"
        )
        return
    already = "" if alert.acknowledged_by == by.strip() else "was already "
    click.echo(
        f"alert {alert.id} (task {alert.task_id}) {already}acknowledged by "
        f"{alert.acknowledged_by} at {when(alert.acknowledged_at)}"
    )
