"""W1 and W2: N three-step workflows submitted up front, then every role in this process.

Throughput is measured from the moment the roles start until all N tasks are
terminal; submission is timed separately. Submission, the run and the read of
the event log each open the store anew, so that on PostgreSQL the run's
database transactions can be counted on their own (`shepherd.bench.pgstat`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any

from shepherd.bench.counts import commits, per
from shepherd.bench.flow import STEPS, Holders, build_app, submit_all
from shepherd.bench.measure import Polls, percentile, spans, terminal, timeline, wait_until
from shepherd.bench.pgstat import XactCounter, is_postgres


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
    #: The submitting process's store counters (`submit_all`, before the run).
    submit_stats: dict[str, float]
    #: Store commits (`shepherd.bench.counts`) of the submission and the run, per workflow.
    commits_per_workflow: float
    settings: dict[str, Any]
    #: PostgreSQL only: committed database transactions of the run phase (every
    #: role's reads and writes), from `pg_stat_database.xact_commit`, less the
    #: harness's own polls and the cost of opening and closing the store.
    db_xacts: int | None = None
    #: The harness's `count_tasks` polls during the run (subtracted above).
    harness_xacts: int = 0
    #: Transactions an open + close of the store costs with no role running (subtracted).
    open_close_xacts: int = 0
    #: The `capacity` workload: the resource's capacity, and the most handlers
    #: that held its slots at once (counted by the handlers).
    capacity: int | None = None
    most_holders: int | None = None


async def open_close_cost(counter: XactCounter, store: str, settings: dict[str, Any]) -> int:
    """Database transactions of opening and closing the store with nothing running."""
    before = await counter.read()
    async with build_app(store, **settings):
        pass
    return await counter.read() - before


async def run_throughput(
    workload: str,
    store: str,
    *,
    n: int,
    sleep: float,
    budget: float,
    settings: dict[str, Any],
    capacity: int | None = None,
) -> ThroughputResult:
    """Run one throughput workload on `store` and measure it (through a resource of
    `capacity`, if given)."""
    counter = XactCounter(store) if is_postgres(store) else None
    holders = Holders()
    async with build_app(store, sleep=sleep, capacity=capacity, **settings) as app:
        target = terminal(await app.store.count_tasks()) + n
        before = dict(app.store.statistics())
        started = time.perf_counter()
        ids = await submit_all(app, n)
        submit_s = time.perf_counter() - started
        submitted = dict(app.store.statistics())
    submit_stats = {k: submitted.get(k, 0) - before.get(k, 0) for k in ("commits", "operations")}
    open_close = 0
    if counter is not None:
        open_close = await open_close_cost(counter, store, settings)
        xacts_before = await counter.read()

    polls = Polls()
    app = build_app(store, sleep=sleep, capacity=capacity, holders=holders, **settings)
    async with app:
        ready = asyncio.Event()
        roles = asyncio.create_task(app.run(ready=ready.set), name="bench-roles")
        await ready.wait()
        t0 = time.perf_counter()
        last = await wait_until(
            app.store,
            lambda c: terminal(c) >= target,
            deadline=time.monotonic() + budget,
            alive=roles,
            polls=polls,
        )
        run_s = time.perf_counter() - t0
        roles.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await roles
        if terminal(last) < target:
            print(f"{workload}: not all {n} workflows ended within {budget:g}s", file=sys.stderr)
        stats = dict(app.store.statistics())
    db_xacts = None
    if counter is not None:
        db_xacts = await counter.read() - xacts_before - polls.n - open_close
    async with build_app(store, sleep=sleep, **settings) as reader:
        # Every task has ended: read on until the log shows each (on PostgreSQL
        # another client's open transaction can hold the last events back).
        line = await timeline(reader.store, ids, complete=ids)

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
        submit_stats=submit_stats,
        commits_per_workflow=per(commits(submit_stats) + commits(stats), n),
        settings=dict(settings),
        db_xacts=db_xacts,
        harness_xacts=polls.n,
        open_close_xacts=open_close,
        capacity=capacity,
        most_holders=holders.most if capacity is not None else None,
    )
