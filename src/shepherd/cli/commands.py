"""The `shepherd` commands. Each one is sync at the edge: one `asyncio.run` per command.

Errors are raised, never printed here: `shepherd.cli.main` turns them into one
line on stderr and exit code 2.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from shepherd import retention
from shepherd.app import ROLES
from shepherd.cli import render
from shepherd.cli.loader import (
    delegate,
    open_app,
    parse_json_argument,
    parse_roles,
    run_with,
    serve,
)
from shepherd.core.breaker import BreakerState
from shepherd.core.retention import cutoff
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, ShepherdError, TaskFailedError
from shepherd.payloads import dumps

if TYPE_CHECKING:
    from shepherd.app import App
    from shepherd.core.breaker import BreakerEvent
    from shepherd.core.records import Event, Task
    from shepherd.core.workers import Worker
    from shepherd.retention import Purged

F = TypeVar("F", bound=Callable[..., Any])

_STATES = ", ".join(state.value for state in ProcessState)
_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True}


def store_option(fn: F) -> F:
    """`--store URL`: the state store, overriding the app's and the group's."""
    return click.option(
        "--store",
        metavar="URL",
        default=None,
        help="State store URL, e.g. sqlite:///shepherd.db (overrides the app's).",
    )(fn)


def json_option(fn: F) -> F:
    """`--json`: print JSON for scripts instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(fn)


def app_option(fn: F) -> F:
    """`--app APP`: take the store from an app module (optional)."""
    return click.option(
        "--app", "app_spec", metavar="APP", help="module:attr of an App whose store to use."
    )(fn)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    metavar="URL",
    envvar="SHEPHERD_STORE",
    help="State store URL for every command [env SHEPHERD_STORE; default sqlite:///shepherd.db].",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None) -> None:
    """shepherd: run multi-step tasks and bring every task to an end."""
    ctx.obj = store


def _app(spec: str | None, store: str | None, *, existing: bool = False) -> App:
    group_store = cast("str | None", click.get_current_context().find_root().obj)
    return open_app(spec, store or group_store, existing=existing)


# -- roles -------------------------------------------------------------------
def _roles_option(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    try:
        return parse_roles(value)
    except ConfigError as exc:
        raise click.BadParameter(exc.message.split(": ", 1)[-1]) from None


def _log_option(fn: F) -> F:
    return click.option(
        "--log-level",
        type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
        default="info",
        show_default=True,
        help="Logging level of the roles (to stderr).",
    )(fn)


@cli.command()
@click.argument("app_spec", metavar="APP")
@store_option
@_log_option
def run(app_spec: str, store: str | None, log_level: str) -> None:
    """Run APP with every role in this process.

    APP is `module:attr` (or `module` for `module:app`), imported from the
    current directory. The scheduler, agent and supervisor roles run until
    SIGTERM or SIGINT. Once they run, a line `shepherd ready: ...` is printed.
    """
    _serve(app_spec, store, ROLES, log_level)


@cli.command()
@click.argument("app_spec", metavar="APP")
@click.option(
    "--roles",
    default=",".join(ROLES),
    show_default=True,
    callback=_roles_option,
    help="Comma-separated roles to run.",
)
@store_option
@_log_option
def worker(app_spec: str, roles: tuple[str, ...], store: str | None, log_level: str) -> None:
    """Run APP with the chosen roles only.

    Like `shepherd run`, for processes that specialise (`--roles agent`).
    """
    _serve(app_spec, store, roles, log_level)


def _serve(spec: str, store: str | None, roles: Sequence[str], log_level: str) -> None:
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    app = _app(spec, store)
    asyncio.run(serve(app, roles))


# -- application ---------------------------------------------------------------
@cli.command()
@click.argument("app_spec", metavar="APP")
@click.argument("workflow")
@click.argument("data", metavar="[JSON]", required=False)
@click.option("--key", help="Business key: resubmitting it returns the same task.")
@click.option("--reply-to", metavar="QUEUE", help="Where the task's status events go.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Wait this long for the result (workers must be running).",
)
@store_option
@json_option
def submit(
    app_spec: str,
    workflow: str,
    data: str | None,
    key: str | None,
    reply_to: str | None,
    wait: float | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Submit a task; print its id.

    The task runs WORKFLOW of APP with input JSON ('-' reads it from stdin).
    With --wait, the result is printed once workers elsewhere have run it.
    """
    payload = parse_json_argument(data, "the JSON argument")
    app = _app(app_spec, store)

    async def work() -> None:
        task_id = await app.submit(workflow, payload, key=key, reply_to=reply_to)
        if wait is None:
            if as_json:
                render.echo_json({"id": task_id})
            else:
                click.echo(task_id)
            return
        if not as_json:
            click.echo(task_id)
        try:
            result = await app.result(task_id, timeout=wait)
        except TimeoutError:
            raise ShepherdError(f"task {task_id} did not end within {wait:g}s") from None
        except TaskFailedError as exc:  # its error may hold a whole traceback: one line only
            raise ShepherdError(
                f"task {task_id} ended {exc.state}: {render.reason(exc.error)}"
            ) from None
        if as_json:
            render.echo_json({"id": task_id, "process_state": "processed", "result": result})
        else:
            click.echo(dumps(result))

    run_with(app, work)


# -- operator ------------------------------------------------------------------
def _states_option(
    _ctx: click.Context, _param: click.Parameter, values: Sequence[str]
) -> tuple[ProcessState, ...]:
    states: list[ProcessState] = []
    for name in (part.strip() for value in values for part in value.split(",")):
        try:
            states.append(ProcessState(name.lower()))
        except ValueError:
            raise click.BadParameter(f"unknown state {name!r} (choose from {_STATES})") from None
    return tuple(states)


@cli.command()
@click.argument("app_spec", metavar="[APP]", required=False)
@click.option(
    "--state",
    "states",
    multiple=True,
    callback=_states_option,
    metavar="STATE",
    help=f"Only tasks in this state (repeat, or comma-separate): {_STATES}.",
)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@store_option
@json_option
def tasks(
    app_spec: str | None,
    states: tuple[ProcessState, ...],
    limit: int,
    store: str | None,
    as_json: bool,
) -> None:
    """List tasks, newest first.

    APP, when given, only supplies the store URL.
    """
    app = _app(app_spec, store, existing=True)
    found = run_with(app, lambda: app.list_tasks(states=states, limit=limit))
    if as_json:
        render.echo_json([render.task_json(task) for task in found])
    else:
        render.print_tasks(found)


@cli.command()
@click.argument("task_id", metavar="TASK")
@app_option
@store_option
@json_option
def show(task_id: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Show a task, its steps and its history."""
    app = _app(app_spec, store, existing=True)

    async def work() -> tuple[Task, list[Event]]:
        task = await app.get_task(task_id)
        return task, await app.history(task_id)

    task, history = run_with(app, work)
    if as_json:
        render.echo_json(render.task_json(task, history))
    else:
        render.print_task(task, history)


def _echo_state(task: Task, as_json: bool) -> None:
    if as_json:
        render.echo_json(render.task_json(task))
    else:
        click.echo(f"task {task.id}: {task.process_state}")


@cli.command()
@click.argument("task_id", metavar="TASK")
@click.option(
    "--step", "seq", type=click.IntRange(min=1), metavar="SEQ", help="Resubmit this step."
)
@click.option("--payload", metavar="JSON", help="Replacement request for the step.")
@app_option
@store_option
@json_option
def retry(
    task_id: str,
    seq: int | None,
    payload: str | None,
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
    app = _app(app_spec, store, existing=True)
    _echo_state(run_with(app, lambda: app.retry(task_id, seq=seq, payload=replacement)), as_json)


@cli.command()
@click.argument("task_id", metavar="TASK")
@app_option
@store_option
@json_option
def cancel(task_id: str, app_spec: str | None, store: str | None, as_json: bool) -> None:
    """Cancel a task that has not ended.

    Its completed steps are undone (newest first), then it ends cancelled.
    """
    app = _app(app_spec, store, existing=True)
    _echo_state(run_with(app, lambda: app.cancel(task_id)), as_json)


@cli.command()
@click.argument("app_spec", metavar="[APP]", required=False)
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

    Each breaker is shared by every agent process through the store. APP, when
    given, only supplies the store URL.
    """
    app = _app(app_spec, store, existing=True)

    async def work() -> tuple[list[render.BreakerRow], list[BreakerEvent]]:
        rows = []
        for breaker in await app.store.list_breakers():
            latest = []
            if breaker.state is not BreakerState.CLOSED:
                latest = await app.store.breaker_events(service=breaker.service, limit=1)
            rows.append(render.BreakerRow(breaker, latest[0] if latest else None))
        recent = await app.store.breaker_events(limit=events) if events else []
        return rows, recent

    rows, recent = run_with(app, work)
    if as_json:
        render.echo_json(render.breakers_json(rows, recent))
    else:
        render.print_breakers(rows, recent)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration_option(_ctx: click.Context, _param: click.Parameter, value: str) -> timedelta:
    found = _DURATION.fullmatch(value.strip().lower())
    if found is None:
        raise click.BadParameter(
            f"{value!r} is not a duration: a number with s, m, h or d (30s, 15m, 1h, 2d)"
        )
    try:
        return timedelta(seconds=float(found[1]) * _UNITS[found[2]])
    except OverflowError:
        raise click.BadParameter(f"{value!r} is too long a duration") from None


@cli.command()
@click.argument("app_spec", metavar="[APP]", required=False)
@click.option(
    "--since",
    default="1h",
    show_default=True,
    callback=_duration_option,
    metavar="DURATION",
    help="Also list processes that stopped or died this long ago (30s, 15m, 1h, 2d).",
)
@click.option("--app", "app_option", metavar="APP", help="module:attr of an App (same as APP).")
@store_option
@json_option
def workers(
    app_spec: str | None,
    since: timedelta,
    app_option: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """List the processes that run roles: alive, and recently dead or stopped.

    Each process beats its row every `worker_beat` seconds; one silent for
    `worker_ttl` seconds (store clock) is dead. APP, when given, only supplies
    the store URL and those settings.
    """
    if app_spec is not None and app_option is not None and app_spec != app_option:
        raise click.UsageError("give the app once: APP or --app, not both")
    app = _app(app_spec or app_option, store, existing=True)
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
        render.echo_json(render.workers_json(found, now=now, ttl=ttl))
    else:
        render.print_workers(found, now=now, ttl=ttl)


@cli.command()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    callback=_duration_option,
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
    app = _app(app_spec, store, existing=True)
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
        render.echo_json(render.purged_json(done, ended_before))
    else:
        render.print_purged(done, ended_before)


# -- delegated -----------------------------------------------------------------
@cli.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def demo(args: tuple[str, ...]) -> int:
    """Run the order-workflow demo (see `shepherd demo --help`)."""
    return delegate("shepherd.demo", "demo", args)


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(args: tuple[str, ...]) -> int:
    """Run the benchmarks (see `shepherd bench --help`)."""
    return delegate("shepherd.bench", "bench", args)
