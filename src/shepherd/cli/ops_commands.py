"""The operator's store-wide commands: breakers, workers, purge.

`--app` is optional here: it only supplies the store and the settings
(`worker_ttl`, `key_retention`, `purge_batch`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

from shepherd.cli import render_ops
from shepherd.cli.loader import run_with
from shepherd.cli.options import (
    Command,
    app_option,
    duration_option,
    json_option,
    open_for,
    store_option,
)
from shepherd.cli.render import echo_json
from shepherd.core.breaker import BreakerState
from shepherd.core.retention import cutoff
from shepherd.supervisor import retention

if TYPE_CHECKING:
    from shepherd.core.breaker import BreakerEvent
    from shepherd.core.workers import Worker
    from shepherd.supervisor.retention import Purged

__all__ = ["COMMANDS", "breakers", "purge", "workers"]


@click.command(cls=Command)
@app_option
@click.option(
    "--events",
    "events",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    metavar="N",
    help="How many of the latest state changes to show (0: none).",
)
@store_option
@json_option
def breakers(app_spec: str | None, events: int, store: str | None, as_json: bool) -> None:
    """Show the circuit breaker of every remote service, and its latest changes.

    Each breaker is shared by every agent process through the store.
    """
    app = open_for(app_spec, store, existing=True)

    async def work() -> tuple[list[render_ops.BreakerRow], list[BreakerEvent]]:
        await app.open()
        rows = []
        for breaker in await app.store.list_breakers():
            latest = []
            if breaker.state is not BreakerState.CLOSED:
                latest = await app.store.breaker_events(service=breaker.service, limit=1)
            rows.append(render_ops.BreakerRow(breaker, latest[0] if latest else None))
        recent = await app.store.breaker_events(limit=events) if events else []
        return rows, recent

    rows, recent = run_with(app, work)
    if as_json:
        echo_json(render_ops.breakers_json(rows, recent))
    else:
        render_ops.print_breakers(rows, recent)


@click.command(cls=Command)
@app_option
@click.option(
    "--since",
    default="1h",
    show_default=True,
    callback=duration_option,
    metavar="DURATION",
    help="Also list processes that stopped or died this long ago (30s, 15m, 1h, 2d).",
)
@store_option
@json_option
def workers(app_spec: str | None, since: timedelta, store: str | None, as_json: bool) -> None:
    """List the processes that run roles: alive, and recently dead or stopped.

    Each process beats its row every `worker_beat` seconds; one silent for
    `worker_ttl` seconds (store clock) is dead.
    """
    app = open_for(app_spec, store, existing=True)
    ttl = app.settings.worker_ttl

    async def work() -> tuple[list[Worker], datetime]:
        await app.open()
        now = app.store.now()
        # Never less than the ttl: every live process has beaten since then.
        back = max(since, timedelta(seconds=ttl))
        try:
            start: datetime | None = now - back
        except OverflowError:  # further back than datetime goes: everything
            start = None
        return await app.store.list_workers(since=start), now

    found, now = run_with(app, work)
    if as_json:
        echo_json(render_ops.workers_json(found, now=now, ttl=ttl))
    else:
        render_ops.print_workers(found, now=now, ttl=ttl)


@click.command(cls=Command)
@click.option(
    "--older-than",
    "older_than",
    required=True,
    callback=duration_option,
    metavar="DURATION",
    help="Purge tasks that ended at least this long ago (90s, 30m, 12h, 7d).",
)
@app_option
@store_option
@json_option
def purge(older_than: timedelta, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Delete ended tasks now, with their steps, events and messages; print how many.

    Only `processed`, `compensated` and `cancelled` tasks that ended at least
    DURATION ago go (store clock); tasks in `error` and unfinished ones stay,
    whatever their age. A purged task's key keeps returning its id for
    `key_retention`; key tombstones older than that go too. Runs in batches of
    `purge_batch` tasks, until none is left.
    """
    app = open_for(app_spec, store, existing=True)
    settings = app.settings

    async def work() -> tuple[Purged, datetime | None]:
        await app.open()
        now = app.store.now()
        ended_before = cutoff(now, older_than.total_seconds())
        done = await retention.purge(
            app.store,
            ended_before=ended_before,
            purged_before=cutoff(now, settings.key_retention),
            batch=settings.purge_batch,
        )
        return done, ended_before

    done, ended_before = run_with(app, work)
    if as_json:
        echo_json(render_ops.purged_json(done, ended_before))
    else:
        render_ops.print_purged(done, ended_before)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (breakers, workers, purge)
