"""The operator's task commands: tasks, show, retry, cancel.

`--app` is optional here: it only supplies the store and the settings; each
command works through its `operations`. TASK is a task id, an unambiguous id
prefix or a business key (see `lookup`).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from shepherd.cli import render
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
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.records import Event, Task

__all__ = ["COMMANDS", "cancel", "retry", "show", "tasks"]

F = TypeVar("F", bound=Callable[..., Any])

_TASK_HELP = (
    f"TASK is a task id, an id prefix of at least {MIN_PREFIX} characters, or a "
    "business key (--workflow NAME picks among workflows that use the same key)."
)


def _task_argument(fn: F) -> F:
    """TASK, and `--workflow NAME` to tell apart the tasks of one key in several workflows."""
    fn = click.option(
        "--workflow",
        metavar="NAME",
        help="Look TASK up as a key (or id prefix) of this workflow only.",
    )(fn)
    return click.argument("name", metavar="TASK")(fn)


@click.command(cls=Command)
@app_option
@click.option("--workflow", metavar="NAME", help="Only tasks of this workflow.")
@click.option("--key", metavar="KEY", help="Only the tasks with this business key.")
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
    states: tuple[ProcessState, ...],
    since: timedelta | None,
    limit: int,
    store: str | None,
    as_json: bool,
) -> None:
    """List tasks, newest first, then how many.

    Filters combine: `--workflow orders.process --state error --since 1h`.
    """
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> tuple[list[Task], datetime]:
        await ops.open()
        now = ops.now()
        try:
            updated_since = None if since is None else now - since
        except OverflowError:  # further back than datetime goes: no bound
            updated_since = None
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

    async def work() -> tuple[Task, list[Event], datetime]:
        task_id = await find_task_id(ops, name, workflow=workflow)
        return await ops.get_task(task_id), await ops.history(task_id), ops.now()

    task, history, now = run_with(ops, work)
    if as_json:
        render.echo_json(render.task_json(task, history))
    else:
        render.print_task(task, history, now=now)


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
@_task_argument
@click.option(
    "--step", "seq", type=click.IntRange(min=1), metavar="SEQ", help="Resubmit this step."
)
@click.option("--payload", metavar="JSON", help="Replacement request for the step.")
@by_option
@app_option
@store_option
@json_option
def retry(
    name: str,
    workflow: str | None,
    seq: int | None,
    payload: str | None,
    by: str,
    app_spec: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Retry a task in error.

    It goes back to work from its failed step, or from step SEQ with an
    optional replacement request (--payload).
    """
    replacement = parse_json_argument(payload, "--payload")
    if payload is not None and seq is None:
        raise click.UsageError("--payload needs --step SEQ")
    ops = operations_for(app_spec, store, existing=True)

    async def work() -> Task:
        task_id = await find_task_id(ops, name, workflow=workflow)
        return await ops.retry(task_id, seq=seq, payload=replacement, by=by)

    _echo_state(run_with(ops, work), as_json)


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


#: The commands of this module, for the `shepherd` group.
COMMANDS = (tasks, show, retry, cancel)
