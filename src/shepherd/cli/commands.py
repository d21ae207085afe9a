"""The `shepherd` group and the commands that run an app: run, worker, submit.

Each command is sync at the edge: one `asyncio.run` per command. Errors are
raised, never printed here: `shepherd.cli.run_cli` turns them into one line on
stderr (and a JSON document with `--json`) and the exit code of `exits`. The
operator's commands are in `task_commands` and `ops_commands`; the shared
options in `options`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

import click

from shepherd.app import ROLES, App
from shepherd.assembly import parse_patterns, served_agents
from shepherd.cli import (
    dashboard_command,
    ops_commands,
    render,
    resource_commands,
    schedule_commands,
    signal_commands,
    task_commands,
    token_commands,
    top,
)
from shepherd.cli.loader import parse_json_argument, parse_roles, run_with, serve
from shepherd.cli.metrics_option import MetricsEndpoint, endpoint, metrics_options
from shepherd.cli.options import (
    APP_REQUIRED,
    Command,
    app_option,
    duration_option,
    instant_option,
    json_option,
    looks_like_app,
    open_for,
    require_app,
    store_option,
)
from shepherd.console.exits import WaitTimeoutError
from shepherd.console.logs import configure_logging, log_options
from shepherd.core.workers import WorkerState
from shepherd.errors import ConfigError, ShepherdError
from shepherd.payloads import dumps

#: The usage line of the commands that run the app's code: it is not optional there.
_NEEDS_APP = "--app MODULE:ATTR [OPTIONS]"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--app",
    "app_spec",
    metavar="MODULE:ATTR",
    help="The App for every command that takes --app (the command's own --app wins) "
    "[env SHEPHERD_APP].",
)
@click.option(
    "--store",
    metavar="URL",
    envvar="SHEPHERD_STORE",
    help="State store URL for every command [env SHEPHERD_STORE; default sqlite:///shepherd.db].",
)
@click.pass_context
def cli(ctx: click.Context, app_spec: str | None, store: str | None) -> None:
    """shepherd: run multi-step tasks and bring every task to an end.

    Every command takes the app as --app MODULE:ATTR (or SHEPHERD_APP) and the
    store as --store URL (or SHEPHERD_STORE), after the command or before it
    (shepherd --app shop:app tasks). Exit codes: 0 ok, 2 usage or bad input,
    3 unknown task, 4 the task ended badly, 5 timeout, 6 store unavailable,
    130 interrupted.
    """
    # Each command's own --app reads this one (options.app_option); one that takes none refuses it.
    command = cli.get_command(ctx, ctx.invoked_subcommand or "")
    if app_spec is not None and command is not None and not _takes_app(command):
        raise click.UsageError(f"`shepherd {command.name}` takes no --app", ctx)
    ctx.obj = store


def _takes_app(command: click.Command) -> bool:
    """Whether the command, or a subcommand of the group, has the `--app` option."""
    if any(param.name == "app_spec" for param in command.params):
        return True
    if isinstance(command, click.Group):
        return any(_takes_app(sub) for sub in command.commands.values())
    return False


for _command in (
    *task_commands.COMMANDS,
    *signal_commands.COMMANDS,
    *ops_commands.COMMANDS,
    *resource_commands.COMMANDS,
    *schedule_commands.COMMANDS,
    *token_commands.COMMANDS,
    *top.COMMANDS,
    *dashboard_command.COMMANDS,
):
    cli.add_command(_command)


# -- roles -------------------------------------------------------------------
def _roles_option(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    try:
        return parse_roles(value)
    except ConfigError as exc:
        raise click.BadParameter(exc.message.split(": ", 1)[-1]) from None


def _agents_option(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, ...] | None:
    if value is None:
        return None
    try:
        return parse_patterns(value)
    except ConfigError as exc:
        raise click.BadParameter(exc.message.split(": ", 1)[-1]) from None


#: `--agents`, on the commands that run the agent role.
agents_option = click.option(
    "--agents",
    metavar="PATTERNS",
    callback=_agents_option,
    help="Serve only the agents matching these comma-separated glob patterns "
    "('payments.*,email.send'): a pool of processes per remote service. Each pattern "
    "must match a registered agent. Default: every agent.",
)


@cli.command(cls=Command, options_metavar=_NEEDS_APP)
@app_option
@agents_option
@store_option
@log_options
@metrics_options
def run(
    app_spec: str | None,
    agents: tuple[str, ...] | None,
    store: str | None,
    log_level: str,
    log_level_for: Sequence[tuple[str, str]],
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the app with every role in this process.

    The scheduler, agent and supervisor roles run until SIGTERM or SIGINT.
    Once they run, a line `shepherd ready: ...` is printed.
    """
    metrics = endpoint(metrics_host, metrics_port)
    configure_logging(log_level, log_level_for, log_format=log_format)
    _serve(require_app(app_spec), store, ROLES, agents, metrics)


@cli.command(cls=Command, options_metavar=_NEEDS_APP)
@app_option
@click.option(
    "--roles",
    default=",".join(ROLES),
    show_default=True,
    callback=_roles_option,
    help="Comma-separated roles to run.",
)
@agents_option
@store_option
@log_options
@metrics_options
def worker(
    app_spec: str | None,
    roles: tuple[str, ...],
    agents: tuple[str, ...] | None,
    store: str | None,
    log_level: str,
    log_level_for: Sequence[tuple[str, str]],
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the app with the chosen roles only.

    Like `shepherd run`, for processes that specialise (`--roles agent`), and
    for a pool of processes per remote service (`--roles agent --agents
    "payments.*"`).
    """
    metrics = endpoint(metrics_host, metrics_port)
    configure_logging(log_level, log_level_for, log_format=log_format)
    _serve(require_app(app_spec), store, roles, agents, metrics)


def _serve(
    spec: str,
    store: str | None,
    roles: Sequence[str],
    agents: Sequence[str] | None,
    metrics: MetricsEndpoint | None = None,
) -> None:
    app = open_for(spec, store)
    served_agents(roles, agents, app.agents)  # before the store is opened: a typo changes nothing
    asyncio.run(serve(app, roles, agents=agents, metrics=metrics))


# -- application ---------------------------------------------------------------
@cli.command(cls=Command, options_metavar=_NEEDS_APP)
@click.argument("workflow")
@click.argument("data", metavar="JSON", required=False)
@app_option
@click.option("--key", help="Business key: resubmitting it returns the same task.")
@click.option("--reply-to", metavar="QUEUE", help="Where the task's status events go.")
@click.option(
    "--wait",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Wait this long for the result (workers must be running): exit 4 if the task "
    "ends badly, 5 if it has not ended by then.",
)
@click.option(
    "--delay",
    callback=duration_option,
    metavar="DURATION",
    help="Start it no earlier than this long from now (30s, 15m, 1h, 2d).",
)
@click.option(
    "--at",
    callback=instant_option,
    metavar="TIME",
    help="Start it no earlier than this ISO 8601 time, with its zone (2030-01-31T09:00Z).",
)
@click.option(
    "--deadline",
    callback=duration_option,
    metavar="DURATION",
    help="Cancel it if it has not ended this long after it is due (default: the workflow's).",
)
@store_option
@json_option
def submit(
    workflow: str,
    data: str | None,
    app_spec: str | None,
    key: str | None,
    reply_to: str | None,
    wait: float | None,
    delay: timedelta | None,
    at: datetime | None,
    deadline: timedelta | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Submit a task of WORKFLOW with input JSON ('-' reads stdin); print its id.

    JSON is required: '{}' or 'null' for a workflow that needs no input.
    With --wait, the result is printed once workers elsewhere have run it.
    With --delay or --at it is stored at once and started no earlier than then.
    """
    if delay is not None and at is not None:
        raise click.UsageError("--delay and --at cannot be combined: give one of them")
    if app_spec is None and looks_like_app(workflow):
        raise click.UsageError(
            f"{APP_REQUIRED}: pass the app as --app MODULE:ATTR (--app {workflow}), "
            "not as an argument"
        )
    if data is None:
        raise click.UsageError(
            "Missing argument 'JSON': the task's input ('{}' or 'null' for none; "
            "'-' reads it from stdin)",
            click.get_current_context(),
        )
    spec = require_app(app_spec)
    payload = parse_json_argument(data, "the JSON argument")
    app = open_for(spec, store)
    if workflow not in app.workflows and looks_like_app(workflow):
        raise click.UsageError(
            f"unknown workflow {workflow!r}: the app is given once, as --app MODULE:ATTR; "
            f"then come WORKFLOW and JSON"
        )

    async def work() -> None:
        task_id = await app.submit(
            workflow,
            payload,
            key=key,
            reply_to=reply_to,
            delay=None if delay is None else delay.total_seconds(),
            not_before=at,
            deadline=None if deadline is None else deadline.total_seconds(),
        )
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
            raise await _timed_out(app, task_id, wait, spec) from None
        if as_json:
            render.echo_json({"id": task_id, "process_state": "processed", "result": result})
        else:
            click.echo(dumps(result))

    run_with(app, work)


async def _timed_out(app: App, task_id: str, wait: float, spec: str) -> WaitTimeoutError:
    """The `--wait` timeout, saying how many worker processes are alive to run the task."""
    message = f"task {task_id} did not end within {wait:g}s"
    ops = app.operations
    try:
        ttl = ops.settings.worker_ttl
        now = ops.now()
        listed = await ops.workers(since=timedelta(0))  # those beaten within the ttl
    except ShepherdError:
        return WaitTimeoutError(f"{message} (see `shepherd workers`)", task_id=task_id, alive=None)
    alive = [w for w in listed if w.state(now=now, ttl=ttl) is WorkerState.ALIVE]
    if not alive:
        return WaitTimeoutError(
            f"{message}; 0 worker processes are alive: start one with `shepherd run --app {spec}`",
            task_id=task_id,
            alive=0,
        )
    count = (
        "1 worker process is alive"
        if len(alive) == 1
        else f"{len(alive)} worker processes are alive"
    )
    missing = [role for role in ("scheduler", "agent") if not any(role in w.roles for w in alive)]
    if missing:
        count += f", but none runs the {' or the '.join(missing)} role"
    return WaitTimeoutError(
        f"{message}; {count} (see `shepherd workers`)", task_id=task_id, alive=len(alive)
    )


# -- demo and bench: click commands of their own packages ------------------------
# Their modules import only click and shepherd.console; the work is imported to run.
from shepherd.bench.cli import bench  # noqa: E402 - joins the group defined above
from shepherd.demo.cli import demo  # noqa: E402

cli.add_command(demo)
cli.add_command(bench)
