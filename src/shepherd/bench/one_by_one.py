"""W4: a client submits N workflows one `await app.submit` at a time, then awaits every result.

One `shepherd run` worker process does the work while the client submits (the
way an API process hands work to its workers). Throughput is N over the
client's whole run, from the first submit to the last result; each submit is
timed on its own. The results are awaited in submission order: by the time
the client gets to a task, most have ended, so each costs one read.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shepherd.bench.apart import complain, unless_exits, worker_apart
from shepherd.bench.counts import commits_now, per
from shepherd.bench.flow import WORKFLOW, build_app
from shepherd.bench.lone import Tally
from shepherd.bench.measure import Spread, timeline
from shepherd.bench.pgstat import is_postgres
from shepherd.errors import TaskFailedError

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.app import App


@dataclass(frozen=True, slots=True, kw_only=True)
class OneByOneResult:
    """The figures of one W4 run."""

    workload: str
    backend: str
    n: int
    submitted: int
    processed: int
    #: Submitted, and not `processed` in the store at the end.
    tasks_lost: int
    failed: int
    #: One `await app.submit(...)`, while the worker works.
    submit: Spread
    #: From the first submit to the last one's return.
    submit_phase_s: float
    #: From the first submit to the last result: what `workflows_per_s` divides by.
    total_s: float
    workflows_per_s: float
    #: From the first `received` event to the last `processed` (the store's clock; on
    #: PostgreSQL, events hidden by another open transaction are missing).
    engine_s: float
    #: The client's store: commits and operations of its submits and reads.
    client_stats: dict[str, float]
    #: The worker's store statistics at the end (on SQLite, its writers' turn among them).
    worker_stats: dict[str, float]
    #: Store commits of the client and the worker from the first submit to the
    #: last result (`shepherd.bench.counts`), per workflow.
    commits_per_workflow: float
    #: The worker's exit code when it died before the end.
    worker_exit: int | None = None


async def _submit_then_await(app: App, n: int, tally: Tally, *, deadline: float) -> float:
    """Submit `n` one at a time, then await each result; the submit phase's seconds."""
    began = time.perf_counter()
    for i in range(n):
        started = time.perf_counter()
        tally.ids.append(await app.submit(WORKFLOW, {"i": i}))
        tally.submits.append(time.perf_counter() - started)
    phase = time.perf_counter() - began
    for task_id in tally.ids:
        try:
            await app.result(task_id, timeout=max(deadline - time.monotonic(), 0.001))
        except TaskFailedError:
            tally.failed += 1
            continue
        except TimeoutError:
            break
        tally.done.add(task_id)
        tally.processed += 1
    return phase


async def run_one_by_one(
    store: str, workdir: Path, *, n: int, budget: float, settings: dict[str, Any]
) -> OneByOneResult:
    """Run W4 on `store`, with the worker's stderr under `workdir`."""
    deadline = time.monotonic() + budget
    tally = Tally()
    phase: list[float] = []

    async def drive(app: App) -> None:
        phase.append(await _submit_then_await(app, n, tally, deadline=deadline))

    stderr = workdir / "w4-worker.stderr"
    async with build_app(store, **settings) as app:
        async with worker_apart(store, settings, stderr=stderr) as worker:
            before = await commits_now(app, worker)
            began = time.perf_counter()
            ended = await unless_exits(worker, drive(app))
            total_s = time.perf_counter() - began
            worker_stats = await worker.snapshot()
            commits = await commits_now(app, worker) - before
            exit_code = None if ended else worker.proc.returncode
        stats = dict(app.store.statistics())
        line = await timeline(app.store, tally.ids)
        lost = await tally.lost(app)
    engine = (
        (max(line.processed.values()) - min(line.received.values())).total_seconds()
        if line.processed and line.received
        else math.nan
    )
    complain("W4", lost=lost, submitted=len(tally.ids), exit_code=exit_code, stderr=stderr)
    return OneByOneResult(
        workload="W4",
        backend="postgresql" if is_postgres(store) else "sqlite",
        n=n,
        submitted=len(tally.ids),
        processed=tally.processed,
        tasks_lost=lost,
        failed=tally.failed,
        submit=Spread.of(tally.submits),
        submit_phase_s=phase[0] if phase else math.nan,
        total_s=total_s,
        workflows_per_s=tally.processed / total_s if total_s > 0 else math.nan,
        engine_s=engine,
        client_stats=stats,
        worker_stats=worker_stats,
        commits_per_workflow=per(commits, len(tally.ids)),
        worker_exit=exit_code,
    )


__all__ = ["OneByOneResult", "run_one_by_one"]
