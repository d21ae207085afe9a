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
from shepherd.bench.report import Result, as_json, environment, render
from shepherd.bench.throughput import run_throughput

WORKLOADS = ("W1", "W2", "W3")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shepherd bench",
        description="Measure shepherd: W1 no-op steps, W2 10 ms steps, W3 worker crash recovery.",
    )
    p.add_argument(
        "--store",
        default=None,
        help="store URL (default: a fresh SQLite file per workload in a temp dir)",
    )
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, e.g. W1,W3")
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
    p.add_argument("--sleep", type=float, default=0.010, help="W2/W3 simulated remote call, s")
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
    p.add_argument("--timeout", type=float, default=600.0, help="per workload, s")
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
        else:
            results.append(
                await run_crash(
                    store, tmp, n=opts.w3_n, sleep=opts.sleep, within=opts.w3_within,
                    interval=opts.w3_interval, budget=opts.timeout,
                    settings={**settings, "max_in_flight": opts.w3_in_flight or max(1, opts.w3_n // 10)},
                )
            )  # fmt: skip
    return results


def cli_main(args: list[str]) -> int:
    """Run the benchmark; 0 when every workload ended with no task lost."""
    opts = parser().parse_args(args)
    workloads = [w.strip().upper() for w in opts.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        parser().error(f"unknown workloads {unknown}; choose from {', '.join(WORKLOADS)}")
    logging.basicConfig(level=logging.WARNING)
    env = environment(opts.synchronous, opts.store or "sqlite (fresh file per workload)")
    with tempfile.TemporaryDirectory(prefix="shepherd-bench-") as tmp:
        results = asyncio.run(run(opts, workloads, Path(tmp)))
    if opts.json:
        print(as_json(results, env))
    else:
        render(results, env, Console())
    return 0 if all(r.tasks_lost == 0 for r in results) else 1
