"""W1apart: W1's workflows queued by a client process, one `shepherd run` worker apart.

The way a service hands work to its workers: the worker (every role of the
bench app, `shepherd.bench.apart`) is started and ready first; then this
process, the client, submits N three-no-op-step workflows, a thousand at a
time so that group commit batches them, and polls until all have ended.
Throughput is N over the client's clock from the first submit to the poll that
saw the last one end (every 20 ms); the event log gives the engine's own span,
first `received` to last `processed`. The store commits of both processes over
that span (`shepherd.bench.counts`) give the transactions per workflow.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table

from shepherd.bench.apart import complain, unless_exits, worker_apart
from shepherd.bench.counts import commits_now, per
from shepherd.bench.flow import build_app, submit_all
from shepherd.bench.measure import terminal, timeline, wait_until
from shepherd.bench.pgstat import is_postgres

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from shepherd.app import App

WORKLOAD = "W1apart"
#: Seconds between two polls of the tasks' states.
POLL = 0.02


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedResult:
    """The figures of one W1apart run."""

    workload: str
    backend: str
    n: int
    #: From the first submit to the last one's return (the worker works meanwhile).
    submit_s: float
    #: From the first submit to the poll that saw every workflow ended.
    total_s: float
    workflows_per_s: float
    #: From the first `received` event to the last `processed` (the store's clock).
    engine_s: float
    processed: int
    tasks_lost: int
    #: Store commits of the client and the worker over `total_s`, per workflow.
    commits_per_workflow: float
    #: The client's store counters (its submits).
    client_stats: dict[str, float]
    #: The worker's exit code when it died before the end.
    worker_exit: int | None = None


async def _queue_and_wait(app: App, n: int, ids: list[str], *, deadline: float) -> float:
    """Submit `n` workflows, then poll until all have ended; the submission's seconds."""
    target = terminal(await app.store.count_tasks()) + n
    began = time.perf_counter()
    ids.extend(await submit_all(app, n))
    submit_s = time.perf_counter() - began
    await wait_until(app.store, lambda c: terminal(c) >= target, deadline=deadline, every=POLL)
    return submit_s


async def run_queued(
    store: str, workdir: Path, *, n: int, budget: float, settings: dict[str, Any]
) -> QueuedResult:
    """Run W1apart on `store`, with the worker's stderr under `workdir`."""
    deadline = time.monotonic() + budget
    stderr = workdir / "w1apart-worker.stderr"
    ids: list[str] = []
    phase: list[float] = []

    async def drive(app: App) -> None:
        phase.append(await _queue_and_wait(app, n, ids, deadline=deadline))

    async with build_app(store, **settings) as app:
        async with worker_apart(store, settings, stderr=stderr) as worker:
            before = await commits_now(app, worker)
            began = time.perf_counter()
            ended = await unless_exits(worker, drive(app))
            total_s = time.perf_counter() - began
            commits = await commits_now(app, worker) - before
            exit_code = None if ended else worker.proc.returncode
        stats = dict(app.store.statistics())
        # Read on until the log shows each (see `throughput`), unless the run was cut short.
        line = await timeline(app.store, ids, complete=ids if ended else ())
    engine = (
        (max(line.processed.values()) - min(line.received.values())).total_seconds()
        if line.processed and line.received
        else math.nan
    )
    lost = n - len(line.processed)
    complain(WORKLOAD, lost=lost, submitted=len(ids), exit_code=exit_code, stderr=stderr)
    return QueuedResult(
        workload=WORKLOAD,
        backend="postgresql" if is_postgres(store) else "sqlite",
        n=n,
        submit_s=phase[0] if phase else math.nan,
        total_s=total_s,
        workflows_per_s=len(line.processed) / total_s if total_s > 0 else math.nan,
        engine_s=engine,
        processed=len(line.processed),
        tasks_lost=lost,
        commits_per_workflow=per(commits, n),
        client_stats=stats,
        worker_exit=exit_code,
    )


def render_queued(r: QueuedResult, console: Console) -> None:
    """W1apart's table."""
    table = Table(title="W1apart: a client queues the workflows, one `shepherd run` worker apart")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in (
        ("workflows (3 no-op steps each)", f"{r.n:,}"),
        ("processed / tasks lost", f"{r.processed:,} / {r.tasks_lost}"),
        ("submission (worker working), s", f"{r.submit_s:.2f}"),
        ("first submit -> all ended, s", f"{r.total_s:.2f}"),
        ("workflows/s", f"{r.workflows_per_s:,.0f}"),
        ("first received -> last processed (event log), s", f"{r.engine_s:.2f}"),
        ("store commits per workflow (client + worker)", f"{r.commits_per_workflow:.3f}"),
        ("worker", "-" if r.worker_exit is None else f"exited with {r.worker_exit}"),
    ):
        table.add_row(name, value)
    console.print(table)


__all__ = ["WORKLOAD", "QueuedResult", "render_queued", "run_queued"]
