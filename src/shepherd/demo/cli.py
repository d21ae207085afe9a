"""The `shepherd demo` command: its options, checked; the run is imported only when it runs.

This module imports little more than click, so that `shepherd --help` stays fast.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import cast

import click
from click.core import ParameterSource

from shepherd.console.exits import ExitCode
from shepherd.console.logs import configure_logging, log_options

__all__ = ["demo"]


_RATE = click.FloatRange(min=0.0, max=1.0)


def _number(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """Refuse NaN, which passes any range check."""
    if math.isnan(value):
        raise click.BadParameter(f"{value} is not a number")
    return value


@click.command(short_help="Run the order-workflow demo: every order ends.")
@click.option(
    "--orders",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    metavar="N",
    help="Orders to submit.",
)
@click.option(
    "--store",
    metavar="URL",
    envvar="SHEPHERD_STORE",
    help="State store URL; it must hold no task yet [env SHEPHERD_STORE; default: a fresh "
    "SQLite file in a temporary directory].",
)
@click.option("--keep", is_flag=True, help="Keep the temporary directory (store, ledger, logs).")
@click.option(
    "--crash", is_flag=True, help="Run scheduler+agent in a worker process and SIGKILL it mid-run."
)
@click.option(
    "--transient-rate",
    type=_RATE,
    callback=_number,
    default=0.05,
    show_default=True,
    metavar="P",
    help="Per call: transient failure.",
)
@click.option(
    "--slow-rate",
    type=_RATE,
    callback=_number,
    default=0.01,
    show_default=True,
    metavar="P",
    help="Per call: answer after complete_by.",
)
@click.option(
    "--hang-rate",
    type=_RATE,
    callback=_number,
    default=0.005,
    show_default=True,
    metavar="P",
    help="Per call: never answer.",
)
@click.option(
    "--decline-rate",
    type=_RATE,
    callback=_number,
    default=0.03,
    show_default=True,
    metavar="P",
    help="Per order: card declined.",
)
@click.option(
    "--seed", type=int, default=7, show_default=True, help="Random seed of orders and faults."
)
@click.option(
    "--deadline",
    type=click.FloatRange(min=0.0, min_open=True),
    callback=_number,
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up after this long.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-progress", is_flag=True, help="No live progress bar.")
@click.option("--worker", is_flag=True, hidden=True)  # the --crash worker subprocess
@log_options
@click.pass_context
def demo(
    ctx: click.Context,
    *,
    orders: int,
    store: str | None,
    keep: bool,
    crash: bool,
    transient_rate: float,
    slow_rate: float,
    hang_rate: float,
    decline_rate: float,
    seed: int,
    deadline: float,
    as_json: bool,
    no_progress: bool,
    worker: bool,
    log_level: str,
    log_level_for: Sequence[tuple[str, str]],
    log_format: str,
) -> None:
    """Run the order-workflow demo: every order ends, whatever the services do.

    Orders (reserve stock, charge payment, create shipment) go through
    unreliable simulated services that fail, stall, hang and decline cards;
    every order ends: processed, or compensated (stock released, card
    refunded). shepherd's logs go to a file in the temporary directory (see
    --keep). Exits 5 if an order has not ended by --deadline.
    """
    if transient_rate + slow_rate + hang_rate > 1.0:
        raise click.BadParameter(
            f"they add up to {transient_rate + slow_rate + hang_rate:g}, more than 1 "
            "(a call meets at most one of these faults)",
            param_hint="'--transient-rate' + '--slow-rate' + '--hang-rate'",
        )
    configure_logging(log_level, log_level_for, log_format=log_format)
    if worker:
        from shepherd.demo.worker import run_worker

        ctx.exit(asyncio.run(run_worker()))

    from rich.console import Console

    from shepherd.demo.app import DemoFailed, DemoOptions, DemoUsageError
    from shepherd.demo.run import DemoConfig, run_demo

    store, from_env = _store(ctx, store)
    config = DemoConfig(
        options=DemoOptions(
            orders=orders,
            seed=seed,
            transient_rate=transient_rate,
            slow_rate=slow_rate,
            hang_rate=hang_rate,
            decline_rate=decline_rate,
        ),
        store=store,
        keep=keep,
        crash=crash,
        json=as_json,
        progress=not no_progress,
        deadline=deadline,
        worker_args=_log_args(log_level, log_level_for, log_format),
    )
    try:
        ended = asyncio.run(run_demo(config, Console()))
    except DemoUsageError as exc:
        hint = "'--store' (from SHEPHERD_STORE)" if from_env else "'--store'"
        raise click.BadParameter(str(exc), param_hint=hint) from None
    except DemoFailed as exc:
        click.echo(f"error: the demo failed: {exc}", err=True)
        ctx.exit(ExitCode.FAILURE)
    ctx.exit(ExitCode.OK if ended else ExitCode.TIMEOUT)


def _store(ctx: click.Context, store: str | None) -> tuple[str | None, bool]:
    """The store URL, and whether it came from the environment.

    This command's `--store` first, then the group's (`shepherd --store URL demo`),
    then SHEPHERD_STORE; None for a fresh SQLite file.
    """
    source = ctx.get_parameter_source("store")
    root = ctx.find_root()
    if (
        source is not ParameterSource.COMMANDLINE
        and root is not ctx
        and root.get_parameter_source("store") is ParameterSource.COMMANDLINE
    ):
        return cast("str", root.obj), False
    return store, source is ParameterSource.ENVIRONMENT


def _log_args(level: str, overrides: Sequence[tuple[str, str]], log_format: str) -> tuple[str, ...]:
    """The logging options again, for the `--crash` worker's command line."""
    args = ["--log-level", level, "--log-format", log_format]
    for name, name_level in overrides:
        args += ["--log-level-for", f"{name}={name_level}"]
    return tuple(args)
