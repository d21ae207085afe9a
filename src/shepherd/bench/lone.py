"""lone: one workflow at a time, submitted and awaited; first in one process, then apart.

Each of `n` rounds submits one bench workflow (three no-op steps), awaits
`app.result` and only then starts the next, so nothing else is in flight.
*In one process*, the bench process runs every role itself; *apart*, a
`shepherd run` worker does the work and the bench process is only the client,
as an API process would be. Timed on the client: each `await app.submit`, and
submit → `app.result` returned. From the store's event log: `received` →
`processed`, the engine's own part. The store's commits over the rounds, on
both sides (`shepherd.bench.counts`), give the transactions per workflow.
Between the two modes a bare write commit is timed on the same store
(`shepherd.bench.bare_commit`): the least a submit could cost. After the apart
rounds the worker is left idle for `idle_s` seconds and its CPU use is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shepherd.bench.apart import complain, idle_cpu, unless_ended, unless_exits, worker_apart
from shepherd.bench.bare_commit import bare_commits
from shepherd.bench.counts import commits_now, per
from shepherd.bench.flow import WORKFLOW, build_app
from shepherd.bench.measure import Spread, spans, timeline, unprocessed
from shepherd.bench.pgstat import is_postgres
from shepherd.errors import TaskFailedError

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.app import App

IN_PROCESS = "in-process"
APART = "apart"


@dataclass(slots=True)
class Tally:
    """What the client saw so far; kept when a run is cut short."""

    ids: list[str] = field(default_factory=list)
    #: The tasks whose result the client received.
    done: set[str] = field(default_factory=set)
    submits: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    processed: int = 0
    #: Tasks that ended without a result (compensated, cancelled, error).
    failed: int = 0

    async def lost(self, app: App) -> int:
        """Submitted tasks not `processed` in the store now (only those without a result are read)."""
        return await unprocessed(app.store, (i for i in self.ids if i not in self.done))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoneRun:
    """One mode's figures: in one process, or client and worker apart."""

    mode: str
    n: int
    #: Results the client received.
    processed: int
    #: Submitted, and not `processed` in the store at the end.
    tasks_lost: int
    failed: int
    #: One `await app.submit(...)`.
    submit: Spread
    #: From the call to `app.submit` to `app.result` returning.
    latency: Spread
    #: From the `received` event to the `processed` event (the store's clock; on
    #: PostgreSQL, events hidden by another open transaction are missing).
    engine: Spread
    run_s: float
    #: Store commits over the rounds (the client's, and apart the worker's too), per workflow.
    commits_per_workflow: float
    #: The worker's exit code when it died before the end (apart only).
    worker_exit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LoneResult:
    """The figures of one lone run."""

    workload: str
    backend: str
    n: int
    runs: tuple[LoneRun, ...]
    #: One bare write commit on the same store, timed between the two modes.
    bare_commit: Spread
    #: The apart worker's CPU use while idle, as a fraction of one core (None: not measured).
    worker_idle_cpu: float | None
    idle_s: float
    tasks_lost: int


async def one_at_a_time(app: App, n: int, tally: Tally, *, deadline: float) -> None:
    """Submit, await the result, repeat `n` times; stop at the monotonic `deadline`."""
    for i in range(n):
        began = time.perf_counter()
        task_id = await app.submit(WORKFLOW, {"i": i})
        submitted = time.perf_counter()
        tally.ids.append(task_id)
        tally.submits.append(submitted - began)
        try:
            await app.result(task_id, timeout=max(deadline - time.monotonic(), 0.001))
        except TaskFailedError:
            tally.failed += 1
            continue
        except TimeoutError:
            return
        tally.latencies.append(time.perf_counter() - began)
        tally.done.add(task_id)
        tally.processed += 1


async def _summarize(
    app: App, mode: str, tally: Tally, run_s: float, worker_exit: int | None, commits: float
) -> LoneRun:
    line = await timeline(app.store, tally.ids, complete=tally.done)
    return LoneRun(
        mode=mode,
        n=len(tally.ids),
        processed=tally.processed,
        tasks_lost=await tally.lost(app),
        failed=tally.failed,
        submit=Spread.of(tally.submits),
        latency=Spread.of(tally.latencies),
        engine=Spread.of(spans(line.received, line.processed)),
        run_s=run_s,
        commits_per_workflow=per(commits, len(tally.ids)),
        worker_exit=worker_exit,
    )


async def _in_process(store: str, n: int, *, deadline: float, settings: dict[str, Any]) -> LoneRun:
    tally = Tally()
    async with build_app(store, **settings) as app:
        ready = asyncio.Event()
        roles = asyncio.create_task(app.run(ready=ready.set), name="bench-roles")
        run_s = commits = 0.0
        try:
            if await unless_ended(roles, ready.wait()):
                before = await commits_now(app)
                began = time.perf_counter()
                await unless_ended(roles, one_at_a_time(app, n, tally, deadline=deadline))
                run_s = time.perf_counter() - began
                commits = await commits_now(app) - before
        finally:
            roles.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await roles  # re-raises what made the roles stop, if they did
        run = await _summarize(app, IN_PROCESS, tally, run_s, None, commits)
    complain("lone in-process", lost=run.tasks_lost, submitted=run.n)
    return run


async def _apart(
    store: str,
    workdir: Path,
    n: int,
    *,
    deadline: float,
    idle_s: float,
    settings: dict[str, Any],
) -> tuple[LoneRun, float | None]:
    tally = Tally()
    stderr = workdir / "lone-worker.stderr"
    async with build_app(store, **settings) as app:
        async with worker_apart(store, settings, stderr=stderr) as worker:
            before = await commits_now(app, worker)
            began = time.perf_counter()
            ended = await unless_exits(worker, one_at_a_time(app, n, tally, deadline=deadline))
            run_s = time.perf_counter() - began
            commits = await commits_now(app, worker) - before
            idle = await idle_cpu(worker, idle_s) if ended and idle_s > 0 else None
            exit_code = None if ended else worker.proc.returncode
        run = await _summarize(app, APART, tally, run_s, exit_code, commits)
    complain("lone apart", lost=run.tasks_lost, submitted=run.n, exit_code=exit_code, stderr=stderr)
    return run, idle


async def run_lone(
    store: str,
    workdir: Path,
    *,
    n: int,
    idle_s: float,
    budget: float,
    settings: dict[str, Any],
) -> LoneResult:
    """Run lone on `store`: `n` rounds in one process, then `n` with the worker apart."""
    deadline = time.monotonic() + budget
    inside = await _in_process(store, n, deadline=deadline, settings=settings)
    bare = await bare_commits(store, n, synchronous=str(settings.get("sqlite_synchronous", "FULL")))
    apart, idle = await _apart(
        store, workdir, n, deadline=deadline, idle_s=idle_s, settings=settings
    )
    return LoneResult(
        workload="lone",
        backend="postgresql" if is_postgres(store) else "sqlite",
        n=n,
        runs=(inside, apart),
        bare_commit=bare,
        worker_idle_cpu=idle,
        idle_s=idle_s,
        tasks_lost=inside.tasks_lost + apart.tasks_lost,
    )


__all__ = ["LoneResult", "LoneRun", "Tally", "one_at_a_time", "run_lone"]
