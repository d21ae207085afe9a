"""The `shepherd bench` command: its options, checked; the workloads are imported only to run.

This module imports little more than click, so that `shepherd --help` stays fast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import click
from click.core import ParameterSource

from shepherd.console.exits import ExitCode
from shepherd.console.logs import configure_logging, log_options

__all__ = ["DEFAULT_WORKLOADS", "WORKLOADS", "bench"]

#: Every workload; W1apart, W4 to W7, lone, soak, sleepers and signal only when asked for (W6
#: and soak take minutes).
WORKLOADS = (
    "W1", "W2", "W3", "W4", "W5", "W6", "W7", "lone", "soak", "capacity", "W1apart", "sleepers",
    "signal",
)  # fmt: skip
DEFAULT_WORKLOADS = ("W1", "W2", "W3")

_COUNT = click.IntRange(min=1)
_POSITIVE = click.FloatRange(min=0.0, min_open=True)


def _number(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """Refuse NaN, which passes any range check."""
    if math.isnan(value):
        raise click.BadParameter(f"{value} is not a number")
    return value


def _rates_option(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[float, ...]:
    rates: list[float] = []
    for part in (p.strip() for p in value.split(",")):
        try:
            rate = float(part)
        except ValueError:
            raise click.BadParameter(f"{part!r} is not a number of workflows per second") from None
        if not (rate > 0 and math.isfinite(rate)):
            raise click.BadParameter(f"{part!r}: a rate must be a positive number")
        rates.append(rate)
    return tuple(rates)


def _workloads_option(_ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    known = {w.upper(): w for w in WORKLOADS}
    named = [w.strip() for w in value.split(",") if w.strip()]
    unknown = [w for w in named if w.upper() not in known]
    if unknown or not named:
        what = (
            f"unknown workload {', '.join(map(repr, unknown))}" if unknown else "no workload named"
        )
        raise click.BadParameter(f"{what}; choose from {', '.join(WORKLOADS)}")
    return tuple(known[w.upper()] for w in named)


@click.command(
    short_help="Measure shepherd: throughput, latency, crash recovery, soak.",
    # Log lines to stderr at info, one per task event, would weigh on the figures.
    context_settings={"default_map": {"log_level": "warning"}},
)
@click.option(
    "--store",
    metavar="URL",
    help="Store URL for every workload (here or before the command: shepherd --store URL "
    "bench); SHEPHERD_STORE is not read, as the bench writes thousands of tasks [default: a "
    "fresh SQLite file per workload in a temporary directory].",
)
@click.option(
    "--workloads",
    default=",".join(DEFAULT_WORKLOADS),
    show_default=True,
    callback=_workloads_option,
    metavar="LIST",
    help=f"Comma-separated, e.g. W1,W3 (of {', '.join(WORKLOADS)}).",
)
@click.option(
    "--n",
    type=_COUNT,
    default=5000,
    show_default=True,
    metavar="N",
    help="Workflows for W1, W1apart, W2 and capacity.",
)
@click.option(
    "--w3-n", type=_COUNT, default=500, show_default=True, metavar="N", help="Workflows for W3."
)
@click.option(
    "--capacity",
    type=_COUNT,
    default=50,
    show_default=True,
    metavar="N",
    help="capacity: the resource's capacity (its steps are W2's, each holding a slot).",
)
@click.option(
    "--w5-n",
    type=_COUNT,
    default=20000,
    show_default=True,
    metavar="N",
    help="W5: events for the batched run (the unbatched one sends a tenth).",
)
@click.option(
    "--w5-producers",
    type=_COUNT,
    default=200,
    show_default=True,
    metavar="N",
    help="W5: concurrent producers, each sending its events one app.call at a time.",
)
@click.option(
    "--w7-n",
    type=_COUNT,
    default=5000,
    show_default=True,
    metavar="N",
    help="W7: workflows for each run (batched, then unbatched).",
)
@click.option(
    "--w7-fsync/--w7-no-fsync",
    default=True,
    show_default=True,
    help="W7: whether the owner appends each handling's lines to its key's file and fsyncs it "
    "(without: it writes nothing, and only the store's cost of a handling is left).",
)
@click.option(
    "--sleepers-n",
    type=_COUNT,
    default=10000,
    show_default=True,
    metavar="N",
    help="sleepers: tasks asleep at once (ctx.sleep_until).",
)
@click.option(
    "--sleepers-spread",
    type=_POSITIVE,
    callback=_number,
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="sleepers: their due times spread evenly over this many seconds.",
)
@click.option(
    "--sleepers-lead",
    type=_POSITIVE,
    callback=_number,
    default=20.0,
    show_default=True,
    metavar="SECONDS",
    help="sleepers: seconds from the submit to the first due time (the idle CPU is measured "
    "in what is left of it once every task is asleep).",
)
@click.option(
    "--signal-n",
    type=_COUNT,
    default=200,
    show_default=True,
    metavar="N",
    help="signal: waits signalled one at a time by a sender process (after 10 not counted).",
)
@click.option(
    "--w4-n", type=_COUNT, default=2000, show_default=True, metavar="N", help="Workflows for W4."
)
@click.option(
    "--w6-rates",
    default="100,500,1000",
    show_default=True,
    callback=_rates_option,
    metavar="LIST",
    help="W6: offered rates, workflows per second, comma-separated.",
)
@click.option(
    "--w6-seconds",
    type=_POSITIVE,
    callback=_number,
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="W6: seconds of arrivals at each rate.",
)
@click.option(
    "--lone-n",
    type=_COUNT,
    default=200,
    show_default=True,
    metavar="N",
    help="lone: rounds in each mode (in one process, then apart).",
)
@click.option(
    "--idle-seconds",
    type=click.FloatRange(min=0.0),
    callback=_number,
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="lone: how long the idle worker's CPU use is measured (0: not measured).",
)
@click.option(
    "--synchronous",
    type=click.Choice(["FULL", "NORMAL"], case_sensitive=False),
    default="FULL",
    show_default=True,
    help="SQLite durability.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
@click.option(
    "--sleep",
    type=click.FloatRange(min=0.0),
    callback=_number,
    default=0.010,
    show_default=True,
    metavar="SECONDS",
    help="W2/W3/soak simulated remote call.",
)
@click.option(
    "--max-in-flight",
    type=_COUNT,
    default=5000,
    show_default=True,
    metavar="N",
    help="The App's max_in_flight.",
)
@click.option(
    "--agent-concurrency",
    type=_COUNT,
    default=5000,
    show_default=True,
    metavar="N",
    help="The App's agent_concurrency.",
)
@click.option(
    "--claim-batch",
    type=_COUNT,
    default=256,
    show_default=True,
    metavar="N",
    help="The App's claim_batch.",
)
@click.option(
    "--w3-within",
    type=_POSITIVE,
    callback=_number,
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="W3 step window.",
)
@click.option(
    "--w3-interval",
    type=_POSITIVE,
    callback=_number,
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="W3 supervisor interval.",
)
@click.option(
    "--w3-in-flight",
    type=_COUNT,
    default=None,
    metavar="N",
    help="W3 worker max_in_flight [default: w3-n/10, so tasks finish in waves].",
)
@click.option(
    "--timeout",
    type=_POSITIVE,
    callback=_number,
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="Per workload (W6: after its arrivals; soak: its final drain).",
)
@click.option(
    "--minutes",
    type=_POSITIVE,
    callback=_number,
    default=10.0,
    show_default=True,
    metavar="MINUTES",
    help="Soak: minutes of submitting.",
)
@click.option(
    "--rate",
    type=_POSITIVE,
    callback=_number,
    default=200.0,
    show_default=True,
    metavar="N",
    help="Soak: submits per second.",
)
@click.option(
    "--soak-retention",
    type=_POSITIVE,
    callback=_number,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Soak: the workers' retention (ended tasks are purged after it).",
)
@click.option(
    "--kill-every",
    type=_POSITIVE,
    callback=_number,
    default=90.0,
    show_default=True,
    metavar="SECONDS",
    help="Soak: SIGKILL a worker this often.",
)
@click.option(
    "--restart-every",
    type=_POSITIVE,
    callback=_number,
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Soak: run --restart-command this often.",
)
@click.option(
    "--restart-command",
    metavar="COMMAND",
    help="Soak, PostgreSQL only: a shell command that restarts the server [default: none].",
)
@log_options
@click.pass_context
def bench(
    ctx: click.Context,
    *,
    store: str | None,
    workloads: tuple[str, ...],
    n: int,
    w3_n: int,
    capacity: int,
    w5_n: int,
    w5_producers: int,
    w7_n: int,
    w7_fsync: bool,
    sleepers_n: int,
    sleepers_spread: float,
    sleepers_lead: float,
    signal_n: int,
    w4_n: int,
    w6_rates: tuple[float, ...],
    w6_seconds: float,
    lone_n: int,
    idle_seconds: float,
    synchronous: str,
    as_json: bool,
    sleep: float,
    max_in_flight: int,
    agent_concurrency: int,
    claim_batch: int,
    w3_within: float,
    w3_interval: float,
    w3_in_flight: int | None,
    timeout: float,
    minutes: float,
    rate: float,
    soak_retention: float,
    kill_every: float,
    restart_every: float,
    restart_command: str | None,
    log_level: str,
    log_level_for: Sequence[tuple[str, str]],
    log_format: str,
) -> None:
    """Measure shepherd and print the figures.

    W1: three no-op steps per workflow; W2: three 10 ms steps; W3: a worker
    process SIGKILLed mid-run and recovered by the supervisor. Only when named:
    W4, one submit at a time to a `shepherd run` worker apart; W6, open-loop
    latency at fixed rates; lone, one workflow at a time, in one process and
    apart; soak, minutes of steady load with worker kills and, on PostgreSQL,
    server restarts; capacity, W2 through a resource of `--capacity` slots;
    W5, the event writer: producers `app.call` exclusive batched writers;
    W7, one-step workflows whose step an exclusive owner handles, batched and not;
    W1apart, W1's workflows queued by this process for a `shepherd run` worker;
    sleepers, `--sleepers-n` tasks asleep at once: the idle worker's CPU, wake-up lateness;
    signal, `--signal-n` waits each signalled by a sender process: delivery latency.
    Every workload counts its store transactions (commits) per workflow.
    Exits 1 if a workload lost a task (or a worker of W1apart,
    W4, W6 or lone died).
    """
    from shepherd.bench.pgstat import is_postgres
    from shepherd.bench.run import BenchOptions, run_bench

    root = ctx.find_root()
    if (
        store is None
        and root is not ctx
        and root.get_parameter_source("store") is ParameterSource.COMMANDLINE
    ):
        store = cast("str", root.obj)  # `shepherd --store URL bench`
    if restart_command is not None and not (store and is_postgres(store)):
        raise click.UsageError("--restart-command needs a PostgreSQL --store")
    configure_logging(log_level, log_level_for, log_format=log_format)
    options = BenchOptions(
        workloads=workloads,
        store=store,
        n=n,
        w3_n=w3_n,
        capacity=capacity,
        w5_n=w5_n,
        w5_producers=w5_producers,
        w7_n=w7_n,
        w7_fsync=w7_fsync,
        sleepers_n=sleepers_n,
        sleepers_spread=sleepers_spread,
        sleepers_lead=sleepers_lead,
        signal_n=signal_n,
        w4_n=w4_n,
        w6_rates=w6_rates,
        w6_seconds=w6_seconds,
        lone_n=lone_n,
        idle_seconds=idle_seconds,
        synchronous=synchronous.upper(),
        as_json=as_json,
        sleep=sleep,
        max_in_flight=max_in_flight,
        agent_concurrency=agent_concurrency,
        claim_batch=claim_batch,
        w3_within=w3_within,
        w3_interval=w3_interval,
        w3_in_flight=w3_in_flight,
        timeout=timeout,
        minutes=minutes,
        rate=rate,
        soak_retention=soak_retention,
        kill_every=kill_every,
        restart_every=restart_every,
        restart_command=restart_command,
    )
    ctx.exit(ExitCode.OK if run_bench(options) else ExitCode.FAILURE)
