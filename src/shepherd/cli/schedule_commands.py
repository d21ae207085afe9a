"""`shepherd schedules ...`: list schedules with their last and next run; add, set, pause, resume, trigger.

Every command works through `app.operations.schedules`. `--app` is optional:
it supplies the store and the settings, creates the schedules it declares
(as opening it always does), and lets `add` and `set` check that the
workflow is registered. A bad value is exit code 2 with one line naming the
schedule and the field, and the store is left as it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from shepherd.cli.loader import parse_json_argument, run_with
from shepherd.cli.options import (
    Command,
    app_option,
    duration_option,
    json_option,
    operations_for,
    store_option,
)
from shepherd.cli.render import echo_json, when
from shepherd.cli.tables import Column, echo_table, terminal_width
from shepherd.core.schedules import CatchUp, Schedule

if TYPE_CHECKING:
    from shepherd.core.schedules import StoredSchedule
    from shepherd.operations import Operations
    from shepherd.scheduling import ScheduleView

__all__ = ["COMMANDS", "schedules"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

_COLUMNS = (
    Column("schedule"),
    Column("workflow", "middle", drop=2),
    Column("when", "wide"),
    Column("catch up", "middle", drop=1),
    Column("state"),
    Column("last run"),
    Column("next run"),
)


def _store_options(fn: F) -> F:
    return app_option(store_option(json_option(fn)))


def _run(app_spec: str | None, store: str | None, work: Callable[[Operations], Awaitable[T]]) -> T:
    ops = operations_for(app_spec, store, existing=False)

    async def go() -> T:
        await ops.open()
        return await work(ops)

    return run_with(ops, go)


def _row(view: ScheduleView) -> tuple[str, ...]:
    s = view.schedule
    catch_up = str(s.catch_up) + (f" (max {s.max_catch_up})" if s.catch_up is CatchUp.ALL else "")
    return (
        s.name,
        s.workflow,
        s.rule,
        catch_up,
        "paused" if s.paused else "active",
        when(view.stored.last_tick) or "-",
        when(view.next_tick) or "-",
    )


def _list(app_spec: str | None, store: str | None, as_json: bool) -> None:
    found = _run(app_spec, store, lambda ops: ops.schedules.list())
    if as_json:
        echo_json({"schedules": [v.to_json() for v in found]})
    elif not found:
        click.echo("no schedules")
    else:
        echo_table(_COLUMNS, [_row(v) for v in found], terminal_width())


@click.group(
    invoke_without_command=True,
    short_help="List schedules with their last and next run; add, set, pause, resume, trigger.",
)
@_store_options
@click.pass_context
def schedules(ctx: click.Context, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Schedules: a workflow started on a cron expression or every N seconds, once per tick.

    Without a command: list them (as `schedules list`).
    """
    if ctx.invoked_subcommand is None:
        _list(app_spec, store, as_json)


@schedules.command("list", cls=Command)
@_store_options
def list_(app_spec: str | None, store: str | None, as_json: bool) -> None:
    """List every schedule: its ticks, catch-up policy, state, last and next run."""
    _list(app_spec, store, as_json)


def _echo_done(done: str, stored: StoredSchedule, as_json: bool) -> None:
    s = stored.schedule
    if as_json:
        echo_json({done: {"name": s.name, "workflow": s.workflow, "paused": s.paused}})
    else:
        click.echo(f"{done} schedule {s.name!r} ({s.workflow}, {s.rule})")


def _fields(fn: F) -> F:
    """The options of a schedule's fields, `add`'s and `set`'s."""
    for option in reversed(
        [
            click.option("--workflow", help="The workflow each tick starts."),
            click.option("--cron", metavar="EXPR", help="A cron expression ('30 2 * * *')."),
            click.option(
                "--every",
                callback=duration_option,
                metavar="DURATION",
                help="Or a tick every 30s, 15m, 1h, 2d.",
            ),
            click.option("--data", metavar="JSON", help="Each task's input."),
            click.option("--timezone", help="The IANA zone the cron expression reads (UTC)."),
            click.option(
                "--catch-up",
                metavar="skip|latest|all",
                help="What ticks missed in an outage become.",
            ),
            click.option(
                "--max-catch-up", type=int, metavar="N", help="Most missed ticks `all` fires."
            ),
        ]
    ):
        fn = option(fn)
    return fn


def _given(
    name: str,
    *,
    workflow: str | None,
    cron: str | None,
    every: timedelta | None,
    data: str | None,
    timezone: str | None,
    catch_up: str | None,
    max_catch_up: int | None,
) -> dict[str, Any]:
    """The fields given on the command line (data decoded first)."""
    given: dict[str, Any] = {
        "workflow": workflow,
        "cron": cron,
        "every": None if every is None else every.total_seconds(),
        "timezone": timezone,
        "catch_up": catch_up,
        "max_catch_up": max_catch_up,
    }
    if data is not None:
        given["data"] = parse_json_argument(data, f"--data of schedule {name!r}")
    return {k: v for k, v in given.items() if v is not None or k == "data"}


@schedules.command("add", cls=Command)
@click.argument("name")
@_fields
@_store_options
def add(name: str, app_spec: str | None, store: str | None, as_json: bool, **fields: Any) -> None:
    """Add schedule NAME: --workflow, and --cron or --every (an error if NAME exists)."""
    given = _given(name, **fields)
    if "workflow" not in given:
        raise click.UsageError("give --workflow", click.get_current_context())
    schedule = Schedule(name=name, **given)
    _echo_done("added", _run(app_spec, store, lambda ops: ops.schedules.add(schedule)), as_json)


@schedules.command("set", cls=Command)
@click.argument("name")
@_fields
@_store_options
def set_(name: str, app_spec: str | None, store: str | None, as_json: bool, **fields: Any) -> None:
    """Change schedule NAME: only the fields given (--cron or --every replaces the other)."""
    given = _given(name, **fields)
    if not given:
        raise click.UsageError("nothing to change: give a field", click.get_current_context())
    changed = _run(app_spec, store, lambda ops: ops.schedules.change(name, **given))
    _echo_done("changed", changed, as_json)


@schedules.command("pause", cls=Command)
@click.argument("name")
@_store_options
def pause(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Pause schedule NAME: no tick starts a task until it is resumed."""
    _echo_done("paused", _run(app_spec, store, lambda ops: ops.schedules.pause(name)), as_json)


@schedules.command("resume", cls=Command)
@click.argument("name")
@_store_options
def resume(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Resume schedule NAME: its next tick fires; the ticks of its pause are not caught up."""
    _echo_done("resumed", _run(app_spec, store, lambda ops: ops.schedules.resume(name)), as_json)


@schedules.command("trigger", cls=Command)
@click.argument("name")
@_store_options
def trigger(name: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Start schedule NAME's workflow now, once, outside its ticks; print the task's id."""
    task_id = _run(app_spec, store, lambda ops: ops.schedules.trigger(name))
    if as_json:
        echo_json({"schedule": name, "task": task_id})
    else:
        click.echo(task_id)


COMMANDS = (schedules,)
