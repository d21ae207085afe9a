"""The bench's run: each chosen workload in turn on its store, then the figures."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from rich.console import Console

from shepherd.bench.crash import run_crash
from shepherd.bench.report import Result, as_json, environment, render
from shepherd.bench.soak import run_soak
from shepherd.bench.soak_result import SoakOptions
from shepherd.bench.throughput import run_throughput


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
    timeout: float = 600.0
    minutes: float = 10.0
    rate: float = 200.0
    soak_retention: float = 60.0
    kill_every: float = 90.0
    restart_every: float = 60.0
    restart_command: str | None = None


def run_bench(opts: BenchOptions) -> bool:
    """Run the workloads and print the figures; return whether every task was kept."""
    env = environment(opts.synchronous, opts.store or "sqlite (fresh file per workload)")
    with tempfile.TemporaryDirectory(prefix="shepherd-bench-") as tmp:
        results = asyncio.run(_run(opts, Path(tmp)))
    if opts.as_json:
        print(as_json(results, env))
    else:
        render(results, env, Console())
    return all(r.tasks_lost == 0 for r in results)


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
        if name in ("W1", "W2"):
            sleep = 0.0 if name == "W1" else opts.sleep
            results.append(
                await run_throughput(
                    name, store, n=opts.n, sleep=sleep, budget=opts.timeout, settings=settings
                )
            )
        elif name == "soak":
            results.append(await run_soak(store, tmp, _soak(opts)))
        else:
            results.append(
                await run_crash(
                    store, tmp, n=opts.w3_n, sleep=opts.sleep, within=opts.w3_within,
                    interval=opts.w3_interval, budget=opts.timeout,
                    settings={**settings, "max_in_flight": opts.w3_in_flight or max(1, opts.w3_n // 10)},
                )
            )  # fmt: skip
    return results


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
