"""The operator's store-wide commands: breakers, workers, purge, alerts.

`--app` is optional here: it only supplies the store and the settings
(`worker_ttl`, `key_retention`, `purge_batch`); each command works through its
`operations`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import click

from shepherd.cli import render_ops
from shepherd.cli.bulk import BulkRun, all_matching_options, run_bulk, since_bound
from shepherd.cli.loader import run_with
from shepherd.cli.lookup import find_task_id
from shepherd.cli.options import (
    Command,
    app_option,
    duration_option,
    json_option,
    limit_option,
    operations_for,
    states_option,
    store_option,
)
from shepherd.cli.render import echo_json
from shepherd.cli.task_commands import by_option
from shepherd.core.breaker import BreakerState
from shepherd.core.bulk import MAX_BULK, BulkAction
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.breaker import BreakerEvent
    from shepherd.core.workers import Worker
    from shepherd.operations import Purged

__all__ = ["COMMANDS", "alerts", "breakers", "purge", "workers"]


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
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[list[render_ops.BreakerRow], list[BreakerEvent]]:
        breakers = await ops.breakers()
        opened = [b.service for b in breakers if b.state is not BreakerState.CLOSED]
        latest = await ops.latest_breaker_events(opened)
        rows = [render_ops.BreakerRow(b, latest.get(b.service)) for b in breakers]
        recent = await ops.breaker_events(limit=events) if events else []
        return rows, recent

    rows, recent = run_with(ops, work)
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
    ops = operations_for(app_spec, store, existing=True)
    ttl = ops.settings.worker_ttl

    async def work() -> tuple[list[Worker], datetime]:
        await ops.open()
        now = ops.now()
        return await ops.workers(since=since), now

    found, now = run_with(ops, work)
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
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[Purged, datetime | None]:
        return await ops.purge(older_than=older_than)

    done, ended_before = run_with(ops, work)
    if as_json:
        echo_json(render_ops.purged_json(done, ended_before))
    else:
        render_ops.print_purged(done, ended_before)


@click.group(invoke_without_command=True)
@app_option
@click.option(
    "--state",
    type=click.Choice(["open", "acknowledged", "resolved", "all"]),
    default=None,
    help="Only the alerts in this state (default: all).",
)
@click.option("--open", "open_only", is_flag=True, help="Only the open alerts: --state open.")
@limit_option
@store_option
@json_option
@click.pass_context
def alerts(
    ctx: click.Context,
    app_spec: str | None,
    state: str | None,
    open_only: bool,
    limit: int,
    store: str | None,
    as_json: bool,
) -> None:
    """List the operator alerts, newest first, then how many; `alerts ack` acknowledges them.

    An alert is stored in the transaction that moves its task into `error`
    (an escalation, a quarantined poison, a workflow that failed), with the
    reason the alert sinks were sent; a task has one open alert at most, which
    counts its failures (`times`). It is open until an operator acknowledges
    it, and resolved (`by` says by what) once its task ends well.
    """
    if ctx.invoked_subcommand is not None:
        return
    if open_only and state not in (None, "open"):
        raise click.UsageError(f"--open lists the open alerts: it cannot go with --state {state}")
    chosen = "open" if open_only else state
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[list[StoredAlert], datetime]:
        # One more tells whether more match.
        return await ops.alerts(state=chosen, limit=limit + 1), ops.now()

    found, now = run_with(ops, work)
    more = len(found) > limit
    if as_json:
        echo_json(render_ops.alerts_json(found[:limit], more=more))
    else:
        render_ops.print_alerts(found[:limit], now=now, more=more)


@alerts.command("ack", cls=Command)
@click.argument("alert_id", metavar="[ID]", type=int, required=False)
@click.option(
    "--task",
    "tasks",
    multiple=True,
    metavar="TASK",
    help="Acknowledge this task's open alerts (repeat for more; an id, id prefix or key).",
)
@click.option(
    "--workflow", metavar="NAME", help="With --all-matching: only tasks of this workflow."
)
@click.option(
    "--state",
    "states",
    multiple=True,
    callback=states_option,
    metavar="STATE",
    help="With --all-matching: only tasks in this state (repeat; default: error).",
)
@all_matching_options
@by_option
@app_option
@store_option
@json_option
def ack(
    alert_id: int | None,
    tasks: tuple[str, ...],
    workflow: str | None,
    states: tuple[ProcessState, ...],
    all_matching: bool,
    since: timedelta | None,
    dry_run: bool,
    yes: bool,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Acknowledge alert ID, or the open alerts of tasks: each --task, or --all-matching.

    An acknowledged alert is no longer open; a second acknowledgement keeps
    the first. The task itself is not touched: retry or cancel it
    (`shepherd retry TASK`). With --all-matching, the open alerts of every
    task in --state (error by default) of --workflow, changed within --since,
    are acknowledged in one action, after you confirm the count.
    """
    given_ways = [alert_id is not None, bool(tasks), all_matching]
    if sum(given_ways) != 1:
        raise click.UsageError("give exactly one of ID, --task TASK or --all-matching")
    if not all_matching and (workflow or states or since or dry_run or yes):
        raise click.UsageError(
            "--workflow, --state, --since, --dry-run and --yes go with --all-matching"
        )
    # `shepherd alerts --store URL ack ...`: the group's options count too.
    parent = click.get_current_context().parent
    given = parent.params if parent is not None else {}
    ops = operations_for(
        app_spec or given.get("app_spec"), store or given.get("store"), existing=True
    )
    as_json = as_json or bool(given.get("as_json"))
    if alert_id is not None:
        done = run_with(ops, lambda: ops.acknowledge_alert(alert_id, by=by))
        if as_json:
            echo_json(render_ops.acknowledged_json(done))
        else:
            render_ops.print_acknowledged(done, by=by)
        return
    if tasks:
        what = "the tasks given"

        async def named() -> list[str]:
            return [await find_task_id(ops, name) for name in tasks]

        run = BulkRun(ops=ops, action=BulkAction.ACKNOWLEDGE, what=what, by=by)
        run_bulk(run, named, as_json=as_json)
        return
    chosen = states or (ProcessState.ERROR,)
    what = ", ".join(
        [f"in {' or '.join(s.value for s in chosen)}"]
        + ([f"workflow {workflow}"] if workflow else [])
        + ([f"changed within {since}"] if since else [])
    )

    async def matching() -> list[str]:
        await ops.open()
        return await ops.matching_task_ids(
            limit=MAX_BULK + 1,
            states=chosen,
            workflow=workflow,
            updated_since=since_bound(ops, since),
        )

    run = BulkRun(
        ops=ops, action=BulkAction.ACKNOWLEDGE, what=what, by=by, dry_run=dry_run, yes=yes
    )
    run_bulk(run, matching, as_json=as_json)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (breakers, workers, purge, alerts)
