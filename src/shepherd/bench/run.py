"""The bench's run: each chosen workload in turn on its store, then the figures."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from rich.console import Console

from shepherd.bench.crash import run_crash
from shepherd.bench.event_writer import run_event_writer
from shepherd.bench.lone import run_lone
from shepherd.bench.one_by_one import run_one_by_one
from shepherd.bench.open_loop import run_open_loop
from shepherd.bench.owned import run_owned
from shepherd.bench.queued import run_queued
from shepherd.bench.report import Result, as_json, environment, render
from shepherd.bench.signal_latency import run_signal
from shepherd.bench.sleepers import run_sleepers
from shepherd.bench.soak import run_soak
from shepherd.bench.soak_result import SoakOptions
from shepherd.bench.throughput import run_throughput

if TYPE_CHECKING:
    from collections.abc import Coroutine


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """The command line of `shepherd bench`, checked."""

    workloads: tuple[str, ...]
    store: str | None = None
    n: int = 5000
    w3_n: int = 500
    synchronous: str = "FULL"
    as_json: bool = False
    sleep: float = 0.010
    max_in_flight: int = 5000
    agent_concurrency: int = 5000
    claim_batch: int = 256
    w3_within: float = 2.0
    w3_interval: float = 0.5
    w3_in_flight: int | None = None
    w4_n: int = 2000
    w6_rates: tuple[float, ...] = (100.0, 500.0, 1000.0)
    w6_seconds: float = 10.0
    lone_n: int = 200
    idle_seconds: float = 5.0
    timeout: float = 600.0
    minutes: float = 10.0
    rate: float = 200.0
    soak_retention: float = 60.0
    kill_every: float = 90.0
    restart_every: float = 60.0
    restart_command: str | None = None
    capacity: int = 50
    w5_n: int = 20000
    w5_producers: int = 200
    w7_n: int = 5000
    w7_fsync: bool = True
    sleepers_n: int = 10000
    sleepers_spread: float = 10.0
    sleepers_lead: float = 20.0
    signal_n: int = 200


def run_bench(opts: BenchOptions) -> bool:
    """Run the workloads and print the figures; return whether every task was kept.

    A W1apart, W4, W6 or lone worker process that died before the end also makes it False.
    """
    env = environment(opts.synchronous, opts.store or "sqlite (fresh file per workload)")
    with tempfile.TemporaryDirectory(prefix="shepherd-bench-") as tmp:
        try:
            results = asyncio.run(_terminable(_run(opts, Path(tmp))))
        except asyncio.CancelledError:  # SIGTERM: every worker has been stopped on the way
            raise KeyboardInterrupt from None
    if opts.as_json:
        print(as_json(results, env))
    else:
        render(results, env, Console())
    return all(r.tasks_lost == 0 and getattr(r, "worker_exit", None) is None for r in results)


async def _terminable(run: Coroutine[Any, Any, list[Result]]) -> list[Result]:
    """Run `run`; SIGTERM cancels it as Ctrl-C does, so that its worker processes are stopped."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await run
    finally:
        with contextlib.suppress(NotImplementedError):
            loop.remove_signal_handler(signal.SIGTERM)


async def _run(opts: BenchOptions, tmp: Path) -> list[Result]:
    settings: dict[str, Any] = {
        "sqlite_synchronous": opts.synchronous,
        "max_in_flight": opts.max_in_flight,
        "agent_concurrency": opts.agent_concurrency,
        "claim_batch": opts.claim_batch,
    }
    results: list[Result] = []
    for name in opts.workloads:
        store = opts.store or f"sqlite:///{tmp / name.lower()}.db"
        if name in ("W1", "W2", "capacity"):
            sleep = 0.0 if name == "W1" else opts.sleep
            capacity = opts.capacity if name == "capacity" else None
            results.append(
                await run_throughput(
                    name, store, n=opts.n, sleep=sleep, budget=opts.timeout, settings=settings,
                    capacity=capacity,
                )
            )  # fmt: skip
        elif name == "W5":
            results.append(
                await run_event_writer(
                    lambda run: opts.store or f"sqlite:///{tmp / run}.db", tmp, events=opts.w5_n,
                    producers=opts.w5_producers, budget=opts.timeout,
                    settings={"sqlite_synchronous": opts.synchronous},
                )
            )  # fmt: skip
        elif name == "W7":
            results.append(
                await run_owned(
                    lambda run: opts.store or f"sqlite:///{tmp / run}.db", tmp, n=opts.w7_n,
                    fsync=opts.w7_fsync, budget=opts.timeout, settings=settings,
                )
            )  # fmt: skip
        elif name == "sleepers":
            results.append(
                await run_sleepers(
                    store, n=opts.sleepers_n, spread=opts.sleepers_spread,
                    lead=opts.sleepers_lead, budget=opts.timeout, settings=settings,
                )
            )  # fmt: skip
        elif name == "signal":
            results.append(
                await run_signal(store, n=opts.signal_n, budget=opts.timeout, settings=settings)
            )
        elif name == "W1apart":
            results.append(
                await run_queued(store, tmp, n=opts.n, budget=opts.timeout, settings=settings)
            )
        elif name == "soak":
            results.append(await run_soak(store, tmp, _soak(opts)))
        elif name in ("W4", "W6", "lone"):
            results.append(await _latency(name, store, tmp, opts, settings))
        else:
            results.append(
                await run_crash(
                    store, tmp, n=opts.w3_n, sleep=opts.sleep, within=opts.w3_within,
                    interval=opts.w3_interval, budget=opts.timeout,
                    settings={**settings, "max_in_flight": opts.w3_in_flight or max(1, opts.w3_n // 10)},
                )
            )  # fmt: skip
    return results


async def _latency(
    name: str, store: str, tmp: Path, opts: BenchOptions, settings: dict[str, Any]
) -> Result:
    """W4, W6 or lone: a client in this process, the worker (or every role) as they say."""
    if name == "W4":
        return await run_one_by_one(store, tmp, n=opts.w4_n, budget=opts.timeout, settings=settings)
    if name == "W6":
        return await run_open_loop(
            store, tmp, rates=opts.w6_rates, seconds=opts.w6_seconds, budget=opts.timeout,
            settings=settings,
        )  # fmt: skip
    return await run_lone(
        store, tmp, n=opts.lone_n, idle_s=opts.idle_seconds, budget=opts.timeout, settings=settings
    )


def _soak(opts: BenchOptions) -> SoakOptions:
    return SoakOptions(
        minutes=opts.minutes,
        rate=opts.rate,
        retention=opts.soak_retention,
        kill_every=opts.kill_every,
        restart_every=opts.restart_every,
        restart_command=opts.restart_command,
        sleep=opts.sleep,
        synchronous=opts.synchronous,
        drain_within=opts.timeout,
    )
