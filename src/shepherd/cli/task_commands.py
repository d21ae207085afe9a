"""The operator's task commands: tasks, show, retry (one task, or all matching), cancel.

`--app` is optional here: it only supplies the store and the settings; each
command works through its `operations`. TASK is a task id, an unambiguous id
prefix or a business key (see `lookup`).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from shepherd.cli import render
from shepherd.cli.bulk import BulkRun, all_matching_options, run_bulk, since_bound
from shepherd.cli.loader import parse_json_argument, run_with
from shepherd.cli.lookup import MIN_PREFIX, find_task_id
from shepherd.cli.options import (
    STATES_HELP,
    Command,
    app_option,
    duration_option,
    json_option,
    limit_option,
    operations_for,
    states_option,
    store_option,
)
from shepherd.cli.render_links import links_json, print_links
from shepherd.cli.signal_rows import echo_signals, signals_json
from shepherd.core.bulk import MAX_BULK, BulkAction
from shepherd.core.states import ProcessState
from shepherd.lineage import children_of, links_of

if TYPE_CHECKING:
    from shepherd.core.children import Links
    from shepherd.core.records import Event, Task
    from shepherd.core.signalling import Signal

__all__ = ["COMMANDS", "cancel", "retry", "show", "tasks"]

F = TypeVar("F", bound=Callable[..., Any])

_TASK_HELP = (
    f"TASK is a task id, an id prefix of at least {MIN_PREFIX} characters, or a "
    "business key (--workflow NAME picks among workflows that use the same key)."
)


def _task_argument(fn: F, *, required: bool = True) -> F:
    """TASK, and `--workflow NAME` to tell apart the tasks of one key in several workflows."""
    fn = click.option(
        "--workflow",
        metavar="NAME",
        help="Look TASK up as a key (or id prefix) of this workflow only"
        + ("." if required else "; with --all-matching, only tasks of this workflow."),
    )(fn)
    return click.argument("name", metavar="TASK", required=required)(fn)


def _optional_task_argument(fn: F) -> F:
    """TASK, optional: `--all-matching` takes its place."""
    return _task_argument(fn, required=False)


@click.command(cls=Command)
@app_option
@click.option("--workflow", metavar="NAME", help="Only tasks of this workflow.")
@click.option("--key", metavar="KEY", help="Only the tasks with this business key.")
@click.option(
    "--parent",
    metavar="TASK",
    help="Only the children of this task (child workflows), by the step that started each.",
)
@click.option(
    "--state",
    "states",
    multiple=True,
    callback=states_option,
    metavar="STATE",
    help=STATES_HELP,
)
@click.option(
    "--since",
    callback=duration_option,
    metavar="DURATION",
    help="Only tasks created or changed within this long (30s, 15m, 1h, 2d).",
)
@limit_option
@store_option
@json_option
def tasks(
    app_spec: str | None,
    workflow: str | None,
    key: str | None,
    parent: str | None,
    states: tuple[ProcessState, ...],
    since: timedelta | None,
    limit: int,
    store: str | None,
    as_json: bool,
) -> None:
    """List tasks, newest first, then how many.

    Filters combine: `--workflow orders.process --state error --since 1h`.
    `--parent TASK` lists a task's children instead, by the step that started each.
    """
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[list[Task], datetime]:
        await ops.open()
        now = ops.now()
        try:
            updated_since = None if since is None else now - since
        except OverflowError:  # further back than datetime goes: no bound
            updated_since = None
        if parent is not None:
            children = await children_of(ops, await find_task_id(ops, parent))
            return [
                t
                for t in children
                if (not states or t.process_state in states)
                and workflow in (None, t.workflow)
                and key in (None, t.key)
                and (updated_since is None or t.updated_at >= updated_since)
            ][: limit + 1], now
        found = await ops.list_tasks(
            states=states,
            limit=limit + 1,  # one more tells whether more match
            workflow=workflow,
            key=key,
            updated_since=updated_since,
        )
        return found, now

    found, now = run_with(ops, work)
    more = len(found) > limit
    if as_json:
        render.echo_json(render.tasks_json(found[:limit], more=more))
    else:
        render.print_tasks(found[:limit], now=now, more=more)


@click.command(cls=Command, epilog=_TASK_HELP)
@_task_argument
@app_option
@store_option
@json_option
def show(
    name: str, workflow: str | None, app_spec: str | None, store: str | None, as_json: bool
) -> None:
    """Show a task: its fields, steps and history, then any traceback of its failure.

    A step called for an entity (`ctx.call(..., entity=)`) also shows the
    resolution it was sent with: entity, partition, resource and its details.
    """
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[Task, list[Event], datetime, list[Signal], Links]:
        task_id = await find_task_id(ops, name, workflow=workflow)
        task, history = await ops.get_task(task_id), await ops.history(task_id)
        return task, history, ops.now(), await ops.signals.of(task_id), await links_of(ops, task)

    task, history, now, signals, links = run_with(ops, work)
    if as_json:
        render.echo_json(
            {
                **render.task_json(task, history),
                "signals": signals_json(signals),
                **links_json(links),
            }
        )
    else:
        render.print_task(task, history, now=now)
        print_links(links)
        echo_signals(signals)


def _who() -> str:
    """Who runs this command, by default: the OS user name, else `cli`."""
    try:
        return getpass.getuser() or "cli"
    except (KeyError, OSError, ImportError):  # no name for the uid, no such variables
        return "cli"


def by_option(fn: F) -> F:
    """`--by NAME`: who acts, recorded in the task's history (default: the OS user)."""
    return click.option(
        "--by",
        metavar="NAME",
        default=_who,
        show_default="your OS user name",
        help="Who does it, recorded in the task's history.",
    )(fn)


def _echo_state(task: Task, as_json: bool) -> None:
    if as_json:
        render.echo_json(render.task_json(task))
    else:
        click.echo(f"task {task.id}: {task.process_state}")


@click.command(cls=Command, epilog=_TASK_HELP)
@_optional_task_argument
@click.option(
    "--step", "seq", type=click.IntRange(min=1), metavar="SEQ", help="Resubmit this step."
)
@click.option("--payload", metavar="JSON", help="Replacement request for the step.")
@all_matching_options
@by_option
@app_option
@store_option
@json_option
def retry(
    name: str | None,
    workflow: str | None,
    seq: int | None,
    payload: str | None,
    all_matching: bool,
    since: timedelta | None,
    dry_run: bool,
    yes: bool,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Retry a task in error, or every task in error a filter matches (--all-matching).

    It goes back to work from its failed step, or from step SEQ with an
    optional replacement request (--payload). With --all-matching, every
    task in error (of --workflow, changed within --since) is retried from
    its failed step with its own payloads, in one action, after you confirm
    the count (--yes: without asking; --dry-run: only list them).
    """
    if (name is None) == (not all_matching):
        raise click.UsageError("give exactly one of TASK or --all-matching")
    bulk_only = [f for f, v in (("--since", since), ("--dry-run", dry_run), ("--yes", yes)) if v]
    if name is not None and bulk_only:
        raise click.UsageError(f"{', '.join(bulk_only)} go with --all-matching, not with TASK")
    if all_matching and (seq is not None or payload is not None):
        raise click.UsageError("--step and --payload retry one TASK, not --all-matching")
    replacement = parse_json_argument(payload, "--payload")
    if payload is not None and seq is None:
        raise click.UsageError("--payload needs --step SEQ")
    ops = operations_for(app_spec, store, existing=True)
    if name is None:
        bulk_run = BulkRun(
            ops=ops, action=BulkAction.RETRY, what="", by=by, dry_run=dry_run, yes=yes
        )
        _retry_all(bulk_run, workflow=workflow, since=since, as_json=as_json)
        return
    task_name = name

    async def work() -> Task:
        task_id = await find_task_id(ops, task_name, workflow=workflow)
        return await ops.retry(task_id, seq=seq, payload=replacement, by=by)

    _echo_state(run_with(ops, work), as_json)


def _retry_all(
    run: BulkRun, *, workflow: str | None, since: timedelta | None, as_json: bool
) -> None:
    """`retry --all-matching`: the tasks in error of `workflow`, changed within `since`."""
    ops = run.ops
    what = ", ".join(
        ["in error"]
        + ([f"workflow {workflow}"] if workflow else [])
        + ([f"changed within {since}"] if since else [])
    )

    async def pick() -> list[str]:
        await ops.open()
        return await ops.matching_task_ids(
            limit=MAX_BULK + 1,
            states=(ProcessState.ERROR,),
            workflow=workflow,
            updated_since=since_bound(ops, since),
        )

    run_bulk(replace(run, what=what), pick, as_json=as_json)


@click.command(cls=Command, epilog=_TASK_HELP)
@_task_argument
@by_option
@app_option
@store_option
@json_option
def cancel(
    name: str,
    workflow: str | None,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Cancel a task that has not ended.

    Its completed steps are undone (newest first), then it ends cancelled.
    """
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> Task:
        return await ops.cancel(await find_task_id(ops, name, workflow=workflow), by=by)

    _echo_state(run_with(ops, work), as_json)


@click.command(cls=Command, epilog=_TASK_HELP)
@_task_argument
@by_option
@app_option
@store_option
@json_option
def wake(
    name: str,
    workflow: str | None,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Wake a sleeping task now (one waiting in ctx.sleep): it goes on at once."""
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> Task:
        task_id = await find_task_id(ops, name, workflow=workflow)
        await ops.wake(task_id, by=by)
        return await ops.get_task(task_id)

    _echo_state(run_with(ops, work), as_json)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (tasks, show, retry, cancel, wake)
