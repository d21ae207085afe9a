"""W1 and W2: N three-step workflows submitted up front, then every role in this process.

Throughput is measured from the moment the roles start until all N tasks are
terminal; submission is timed separately.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any

from shepherd.bench.flow import STEPS, build_app, submit_all
from shepherd.bench.measure import percentile, spans, terminal, timeline, wait_until


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputResult:
    """The figures of one W1/W2 run."""

    workload: str
    n: int
    step_sleep_s: float
    submit_s: float
    run_s: float
    workflows_per_s: float
    steps_per_s: float
    processed: int
    tasks_lost: int
    latency_p50_s: float
    latency_p99_s: float
    run_latency_p50_s: float
    run_latency_p99_s: float
    store_stats: dict[str, float]
    settings: dict[str, Any]


async def run_throughput(
    workload: str,
    store: str,
    *,
    n: int,
    sleep: float,
    budget: float,
    settings: dict[str, Any],
) -> ThroughputResult:
    """Run one throughput workload on `store` and measure it."""
    app = build_app(store, sleep=sleep, **settings)
    async with app:
        target = terminal(await app.store.count_tasks()) + n
        started = time.perf_counter()
        ids = await submit_all(app, n)
        submit_s = time.perf_counter() - started

        ready = asyncio.Event()
        roles = asyncio.create_task(app.run(ready=ready.set), name="bench-roles")
        await ready.wait()
        t0 = time.perf_counter()
        last = await wait_until(
            app.store,
            lambda c: terminal(c) >= target,
            deadline=time.monotonic() + budget,
            alive=roles,
        )
        run_s = time.perf_counter() - t0
        roles.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await roles
        if terminal(last) < target:
            print(f"{workload}: not all {n} workflows ended within {budget:g}s", file=sys.stderr)
        stats = dict(app.store.statistics())
        line = await timeline(app.store, ids)

    e2e = spans(line.received, line.processed)
    run = spans(line.claimed, line.processed)
    return ThroughputResult(
        workload=workload,
        n=n,
        step_sleep_s=sleep,
        submit_s=submit_s,
        run_s=run_s,
        workflows_per_s=n / run_s,
        steps_per_s=STEPS * n / run_s,
        processed=len(line.processed),
        tasks_lost=n - len(line.processed),
        latency_p50_s=percentile(e2e, 50),
        latency_p99_s=percentile(e2e, 99),
        run_latency_p50_s=percentile(run, 50),
        run_latency_p99_s=percentile(run, 99),
        store_stats=stats,
        settings=dict(settings),
    )
