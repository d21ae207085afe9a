"""`python -m shepherd.bench` / `shepherd bench`: run the workloads and print the figures."""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

from shepherd.bench.crash import run_crash
from shepherd.bench.pgstat import is_postgres
from shepherd.bench.report import Result, as_json, environment, render
from shepherd.bench.soak import run_soak
from shepherd.bench.soak_result import SoakOptions
from shepherd.bench.throughput import run_throughput

#: Every workload; `soak` runs for minutes, so only when asked for.
WORKLOADS = ("W1", "W2", "W3", "soak")
DEFAULT_WORKLOADS = ("W1", "W2", "W3")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shepherd bench",
        description="Measure shepherd: W1 no-op steps, W2 10 ms steps, W3 worker crash recovery, "
        "soak: minutes of steady load with worker kills and server restarts.",
    )
    p.add_argument(
        "--store",
        default=None,
        help="store URL (default: a fresh SQLite file per workload in a temp dir)",
    )
    p.add_argument(
        "--workloads",
        default=",".join(DEFAULT_WORKLOADS),
        help=f"comma-separated, e.g. W1,W3 (of {', '.join(WORKLOADS)})",
    )
    p.add_argument("--n", type=int, default=5000, help="workflows for W1 and W2")
    p.add_argument("--w3-n", type=int, default=500, help="workflows for W3")
    p.add_argument(
        "--synchronous",
        choices=("FULL", "NORMAL"),
        default="FULL",
        type=str.upper,
        help="SQLite durability",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.add_argument("--sleep", type=float, default=0.010, help="W2/W3/soak simulated remote call, s")
    p.add_argument("--max-in-flight", type=int, default=5000)
    p.add_argument("--agent-concurrency", type=int, default=5000)
    p.add_argument("--claim-batch", type=int, default=256)
    p.add_argument("--w3-within", type=float, default=2.0, help="W3 step window, s")
    p.add_argument("--w3-interval", type=float, default=0.5, help="W3 supervisor interval, s")
    p.add_argument(
        "--w3-in-flight",
        type=int,
        default=None,
        help="W3 worker max_in_flight (default n/10, so tasks finish in waves)",
    )
    p.add_argument(
        "--timeout", type=float, default=600.0, help="per workload, s (soak: its final drain)"
    )
    p.add_argument("--minutes", type=float, default=10.0, help="soak: minutes of submitting")
    p.add_argument("--rate", type=float, default=200.0, help="soak: submits per second")
    p.add_argument(
        "--soak-retention",
        type=float,
        default=60.0,
        help="soak: the workers' retention, s (ended tasks are purged after it)",
    )
    p.add_argument(
        "--kill-every", type=float, default=90.0, help="soak: SIGKILL a worker every K s"
    )
    p.add_argument(
        "--restart-every", type=float, default=60.0, help="soak: run --restart-command every P s"
    )
    p.add_argument(
        "--restart-command",
        default=None,
        help="soak, PostgreSQL only: a shell command that restarts the server (default: none)",
    )
    return p


async def run(opts: argparse.Namespace, workloads: list[str], tmp: Path) -> list[Result]:
    settings: dict[str, Any] = {
        "sqlite_synchronous": opts.synchronous,
        "max_in_flight": opts.max_in_flight,
        "agent_concurrency": opts.agent_concurrency,
        "claim_batch": opts.claim_batch,
    }
    results: list[Result] = []
    for name in workloads:
        store = opts.store or f"sqlite:///{tmp / name.lower()}.db"
        if name in ("W1", "W2"):
            sleep = 0.0 if name == "W1" else opts.sleep
            results.append(
                await run_throughput(
                    name, store, n=opts.n, sleep=sleep, budget=opts.timeout, settings=settings
                )
            )
        elif name == "soak":
            soak_store = opts.store or f"sqlite:///{tmp / 'soak'}.db"
            results.append(await run_soak(soak_store, tmp, _soak(opts)))
        else:
            results.append(
                await run_crash(
                    store, tmp, n=opts.w3_n, sleep=opts.sleep, within=opts.w3_within,
                    interval=opts.w3_interval, budget=opts.timeout,
                    settings={**settings, "max_in_flight": opts.w3_in_flight or max(1, opts.w3_n // 10)},
                )
            )  # fmt: skip
    return results


def _soak(opts: argparse.Namespace) -> SoakOptions:
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


def cli_main(args: list[str]) -> int:
    """Run the benchmark; 0 when every workload ended with no task lost."""
    opts = parser().parse_args(args)
    known = {w.upper(): w for w in WORKLOADS}
    named = [w.strip() for w in opts.workloads.split(",") if w.strip()]
    unknown = [w for w in named if w.upper() not in known]
    if unknown or not named:
        parser().error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    workloads = [known[w.upper()] for w in named]
    if opts.restart_command and not (opts.store and is_postgres(opts.store)):
        parser().error("--restart-command needs a PostgreSQL --store")
    for flag in ("minutes", "rate", "soak_retention", "kill_every", "restart_every"):
        if getattr(opts, flag) <= 0:
            parser().error(f"--{flag.replace('_', '-')} must be positive")
    logging.basicConfig(level=logging.WARNING)
    env = environment(opts.synchronous, opts.store or "sqlite (fresh file per workload)")
    with tempfile.TemporaryDirectory(prefix="shepherd-bench-") as tmp:
        results = asyncio.run(run(opts, workloads, Path(tmp)))
    if opts.json:
        print(as_json(results, env))
    else:
        render(results, env, Console())
    return 0 if all(r.tasks_lost == 0 for r in results) else 1
