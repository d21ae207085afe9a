"""W6: open-loop latency; workflows arrive at a fixed mean rate and each result is awaited.

For each offered rate a client submits for `seconds` s at Poisson arrivals
(exponential gaps, from a generator seeded with the rate, so every run offers
the same pattern): each arrival starts its own submit-then-`app.result` at its
instant, whether or not the earlier ones have ended, so a slow store delays no
arrival. Latency runs from the arrival instant to `app.result` returning, so a
client that falls behind shows in it. One `shepherd run` worker process does
the work; a rate's stragglers end before the next rate starts.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shepherd.bench.apart import complain, unless_exits, worker_apart
from shepherd.bench.counts import Snapshots, commits_now, per
from shepherd.bench.flow import WORKFLOW, build_app
from shepherd.bench.measure import Spread, unprocessed
from shepherd.bench.pgstat import is_postgres
from shepherd.errors import ShepherdError, TaskFailedError

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.app import App


@dataclass(frozen=True, slots=True, kw_only=True)
class RateResult:
    """One offered rate's figures."""

    rate: float
    seconds: float
    #: Arrivals in the window (about rate * seconds).
    arrivals: int
    acknowledged: int
    #: Submits that failed with a ShepherdError (not acknowledged, not retried), by error type.
    submit_errors: dict[str, int]
    #: Results the client received.
    processed: int
    #: `app.result` calls that raised (other than a timeout), by error type.
    result_errors: dict[str, int]
    #: The first failed submit's or result's message, if any.
    first_error: str | None
    #: Acknowledged, and not `processed` in the store at the end.
    tasks_lost: int
    failed: int
    #: From the arrival instant to `app.result` returning.
    latency: Spread
    #: One `await app.submit(...)`.
    submit: Spread
    #: The most a submit began after its arrival instant (the client's own lag).
    lag_max_s: float
    #: Store commits of the client and the worker over this rate's arrivals and their
    #: results (`shepherd.bench.counts`), per acknowledged workflow.
    commits_per_workflow: float


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenLoopResult:
    """The figures of one W6 run."""

    workload: str
    backend: str
    seconds: float
    rates: tuple[RateResult, ...]
    tasks_lost: int
    #: The worker's exit code when it died before the end.
    worker_exit: int | None = None


@dataclass(slots=True)
class _Arrivals:
    arrivals: int = 0
    ids: list[str] = field(default_factory=list)
    #: The tasks whose result the client received.
    done: set[str] = field(default_factory=set)
    submit_errors: Counter[str] = field(default_factory=Counter)
    result_errors: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    processed: int = 0
    failed: int = 0
    latencies: list[float] = field(default_factory=list)
    submits: list[float] = field(default_factory=list)
    lag_max: float = 0.0
    commits: float = 0.0
    jobs: set[asyncio.Task[None]] = field(default_factory=set)

    def error(self, kind: Counter[str], exc: ShepherdError) -> None:
        kind[type(exc).__name__] += 1
        if self.first_error is None:
            self.first_error = f"{type(exc).__name__}: {exc.message}"


async def _one(app: App, i: int, arrival: float, seen: _Arrivals, *, deadline: float) -> None:
    began = time.perf_counter()
    seen.lag_max = max(seen.lag_max, began - arrival)
    try:
        task_id = await app.submit(WORKFLOW, {"i": i})
    except ShepherdError as exc:
        seen.error(seen.submit_errors, exc)
        return
    seen.submits.append(time.perf_counter() - began)
    seen.ids.append(task_id)
    try:
        await app.result(task_id, timeout=max(deadline - time.monotonic(), 0.001))
    except TaskFailedError:
        seen.failed += 1
        return
    except TimeoutError:
        return
    except ShepherdError as exc:  # the wait failed, not necessarily the task: the store says
        seen.error(seen.result_errors, exc)
        return
    seen.latencies.append(time.perf_counter() - arrival)
    seen.done.add(task_id)
    seen.processed += 1


async def _offer(
    app: App, rate: float, seconds: float, seen: _Arrivals, *, deadline: float
) -> None:
    """Arrivals at `rate` per second for `seconds` s, then wait for every one's result."""
    rng = random.Random(f"W6-{rate:g}")
    start = time.perf_counter()
    at = rng.expovariate(rate)
    while at < seconds:
        # Yields even when late, so that the arrivals already started make progress.
        await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
        job = asyncio.create_task(_one(app, seen.arrivals, start + at, seen, deadline=deadline))
        seen.jobs.add(job)
        job.add_done_callback(seen.jobs.discard)
        seen.arrivals += 1
        at += rng.expovariate(rate)
    while seen.jobs:
        await asyncio.wait(set(seen.jobs))


async def _rates(
    app: App,
    worker: Snapshots,
    rates: tuple[float, ...],
    seconds: float,
    seen: list[_Arrivals],
    *,
    deadline: float,
) -> None:
    for rate in rates:
        seen.append(_Arrivals())
        before = await commits_now(app, worker)
        await _offer(app, rate, seconds, seen[-1], deadline=deadline)
        seen[-1].commits = await commits_now(app, worker) - before


def _figures(rate: float, seconds: float, seen: _Arrivals, lost: int) -> RateResult:
    return RateResult(
        rate=rate,
        seconds=seconds,
        arrivals=seen.arrivals,
        acknowledged=len(seen.ids),
        submit_errors=dict(seen.submit_errors),
        processed=seen.processed,
        result_errors=dict(seen.result_errors),
        first_error=seen.first_error,
        tasks_lost=lost,
        failed=seen.failed,
        latency=Spread.of(seen.latencies),
        submit=Spread.of(seen.submits),
        lag_max_s=seen.lag_max,
        commits_per_workflow=per(seen.commits, len(seen.ids)),
    )


async def run_open_loop(
    store: str,
    workdir: Path,
    *,
    rates: tuple[float, ...],
    seconds: float,
    budget: float,
    settings: dict[str, Any],
) -> OpenLoopResult:
    """Run W6 on `store` at each of `rates`, with the worker's stderr under `workdir`.

    Every result is awaited until `seconds` * len(rates) + `budget` s after the start.
    """
    deadline = time.monotonic() + seconds * len(rates) + budget
    seen: list[_Arrivals] = []
    stderr = workdir / "w6-worker.stderr"
    async with (
        build_app(store, **settings) as app,
        worker_apart(store, settings, stderr=stderr) as worker,
    ):
        try:
            ended = await unless_exits(
                worker, _rates(app, worker, rates, seconds, seen, deadline=deadline)
            )
        finally:
            for arrivals in seen:  # cut short: stop the waits still running
                for job in list(arrivals.jobs):
                    job.cancel()
                await asyncio.gather(*arrivals.jobs, return_exceptions=True)
        exit_code = None if ended else worker.proc.returncode
        # Only the tasks whose result did not come back are looked up.
        missing = [
            await unprocessed(app.store, (i for i in s.ids if i not in s.done)) for s in seen
        ]
    figures = tuple(
        _figures(rate, seconds, s, lost)
        for rate, s, lost in zip(rates, seen, missing, strict=False)
    )
    lost = sum(f.tasks_lost for f in figures)
    acknowledged = sum(f.acknowledged for f in figures)
    complain("W6", lost=lost, submitted=acknowledged, exit_code=exit_code, stderr=stderr)
    for f in figures:
        if f.submit_errors or f.result_errors:
            print(
                f"W6 at {f.rate:g}/s: failed submits {f.submit_errors or 0}, failed result "
                f"waits {f.result_errors or 0}; the first: {f.first_error}",
                file=sys.stderr,
            )
    return OpenLoopResult(
        workload="W6",
        backend="postgresql" if is_postgres(store) else "sqlite",
        seconds=seconds,
        rates=figures,
        tasks_lost=lost,
        worker_exit=exit_code,
    )


__all__ = ["OpenLoopResult", "RateResult", "run_open_loop"]
