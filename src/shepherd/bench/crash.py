"""W3: a worker process is SIGKILLed mid-run; the supervisor recovers its tasks.

The main process submits N W2 workflows and runs only the supervisor role. A
worker subprocess (scheduler + agent roles) does the work; once a third of the
tasks are processed it is killed with SIGKILL and a new worker is started. The
harness then measures how long the rest takes, counts tasks lost, counts
handler executions per step (from the workers' O_APPEND logs) to find
duplicated ones, and counts the tasks charged a failure (`failure_count` > 0
at the end): the crash was not theirs, so the target is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shepherd.bench.counts import STATS_FILE, commits, per, snapshot
from shepherd.bench.flow import build_app, submit_all
from shepherd.bench.measure import (
    Polls,
    charged,
    spans,
    terminal,
    timeline,
    unprocessed,
    wait_until,
)
from shepherd.bench.pgstat import XactCounter, is_postgres
from shepherd.bench.throughput import open_close_cost
from shepherd.core.states import ProcessState
from shepherd.store.contract import REPLY_GRACE

if TYPE_CHECKING:
    from shepherd.store.contract import Store


#: While a step runs, the task's `complete_by` is the step's plus this (docs/concepts.md).
STEP_GRACE = REPLY_GRACE


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashResult:
    """The figures of one W3 run."""

    workload: str
    n: int
    step_sleep_s: float
    within_s: float
    supervisor_interval_s: float
    #: The step window plus one supervisor interval: the plain comparison figure.
    recovery_bound_s: float
    #: The claim's `complete_by` window: max(complete_within, within + step grace).
    claim_window_s: float
    #: docs/guarantees.md section 5: claim window + supervisor interval + poll_interval
    #: (the new scheduler is in another process).
    guaranteed_bound_s: float
    processed_at_kill: int
    #: Tasks the killed worker held (`processing`) when it died.
    claimed_at_kill: int
    kill_to_done_s: float
    restart_to_done_s: float
    #: From the kill to the supervisor's last reset of a dead worker's task.
    kill_to_last_reset_s: float
    #: From a task's reset to its `processed`, worst case.
    reset_to_processed_max_s: float
    processed: int
    tasks_lost: int
    #: Tasks whose `failure_count` is above 0 at the end: each was charged a
    #: failure for a crash that was not its own (the target is 0).
    tasks_charged: int
    executions: int
    distinct_steps: int
    duplicated_executions: int
    resets: int
    store_stats: dict[str, float]
    worker_stats: dict[str, float]
    #: Store commits per workflow (`shepherd.bench.counts`): the submission's, the
    #: supervisor's, the second worker's, and the killed worker's as it told them
    #: just before the kill (what it committed after that is not counted).
    commits_per_workflow: float = float("nan")
    #: The killed worker's store counters, as it told them just before the kill.
    killed_stats: dict[str, float] = field(default_factory=dict)
    #: PostgreSQL only: committed database transactions from the first worker's
    #: start to the end (both workers and the supervisor), from
    #: `pg_stat_database.xact_commit`, less the harness's polls and three
    #: store open + close costs (supervisor process and two workers).
    db_xacts: int | None = None
    harness_xacts: int = 0
    open_close_xacts: int = 0


class Worker:
    """A `shepherd.bench.worker` subprocess."""

    def __init__(self, proc: asyncio.subprocess.Process, stats_file: Path | None = None) -> None:
        self.proc = proc
        #: Where the worker writes its store's counters on SIGUSR1 (`shepherd.bench.counts`).
        self.stats_file = stats_file

    @classmethod
    async def start(
        cls,
        argv: list[str],
        *,
        stderr: Path,
        ready_within: float = 30.0,
        module: str = "shepherd.bench.worker",
        ready: bytes = b"ready",
        env: dict[str, str] | None = None,
        stats_file: Path | None = None,
    ) -> Worker:
        """Spawn `python -m module argv...` and wait for a line starting with `ready`.

        With `stats_file`, the worker is told (`counts.STATS_FILE`) where to
        write its store's counters when `snapshot` asks.
        """
        if stats_file is not None:
            env = {**(os.environ if env is None else env), STATS_FILE: str(stats_file)}
        with stderr.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                env=env,
            )
        worker = cls(proc, stats_file)
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), ready_within)
        except TimeoutError:
            line = b""
        except BaseException:  # cancelled (Ctrl-C): leave no process behind
            worker.kill_nowait()
            raise
        if not line.startswith(ready):
            await worker.kill()
            raise RuntimeError(f"bench worker did not report ready; see {stderr}")
        return worker

    def kill_nowait(self) -> None:
        """SIGKILL without waiting (asyncio's child watcher reaps the process)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    async def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.kill_nowait()
        await self.proc.wait()

    async def snapshot(self) -> dict[str, float]:
        """The worker's store counters now ({} if it cannot tell: no file named, or dead)."""
        if self.stats_file is None or self.proc.returncode is not None:
            return {}
        return await snapshot(self.proc.pid, self.stats_file)

    async def stop(self, *, within: float = 15.0) -> dict[str, float]:
        """SIGTERM, then the statistics it prints on the way out.

        SIGKILLed if it has not ended within `within` s, or if this wait is
        itself interrupted (a second Ctrl-C), so that no process outlives the bench.
        """
        assert self.proc.stdout is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        try:
            out = await asyncio.wait_for(self.proc.stdout.read(), within)
            await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            await self.kill()
            return {}
        except BaseException:
            self.kill_nowait()
            raise
        for line in out.decode().splitlines():
            if line.startswith("stats "):
                stats: dict[str, float] = json.loads(line[len("stats ") :])
                return stats
        return {}


def worker_argv(
    store: str, exec_log: Path, *, sleep: float, within: float, settings: dict[str, Any]
) -> list[str]:
    return [
        "--store", store,
        "--roles", "scheduler,agent",
        "--sleep", str(sleep),
        "--within", str(within),
        "--complete-within", str(within),
        "--exec-log", str(exec_log),
        "--synchronous", str(settings["sqlite_synchronous"]),
        "--max-in-flight", str(settings["max_in_flight"]),
        "--agent-concurrency", str(settings["agent_concurrency"]),
        "--claim-batch", str(settings["claim_batch"]),
    ]  # fmt: skip


def executions(logs: list[Path]) -> Counter[str]:
    """Handler executions per idempotency key (`task_id/seq`), over every worker's log."""
    seen: Counter[str] = Counter()
    for log in logs:
        if log.exists():
            seen.update(line for line in log.read_text().splitlines() if line)
    return seen


@dataclass(frozen=True, slots=True)
class _Phases:
    killed_at: datetime
    processed_at_kill: int
    claimed_at_kill: int
    kill_to_done_s: float
    restart_to_done_s: float
    worker_stats: dict[str, float]
    #: The killed worker's counters, asked for just before the kill.
    killed_stats: dict[str, float]


PROCESSED = ProcessState.PROCESSED
PROCESSING = ProcessState.PROCESSING


async def _kill_and_restart(
    store: Store,
    argv: tuple[list[str], list[str]],
    *,
    stderr: Path,
    kill_at: int,
    done_at: int,
    deadline: float,
    alive: asyncio.Task[None],
    polls: Polls,
) -> _Phases:
    """Start a worker; SIGKILL it once `kill_at` tasks are processed and some are
    claimed (so that the kill strands work in flight); start another."""
    first = await Worker.start(argv[0], stderr=stderr, stats_file=stderr.with_suffix(".stats"))
    killed_stats: dict[str, float] = {}
    try:
        await wait_until(
            store,
            lambda c: c.get(PROCESSED, 0) >= kill_at and c.get(PROCESSING, 0) > 0,
            deadline=deadline,
            every=0.002,
            polls=polls,
        )
        killed_stats = await first.snapshot()
    finally:
        await first.kill()
    killed = time.perf_counter()
    killed_at = datetime.now(UTC)
    at_kill = await store.count_tasks()
    polls.n += 1
    second = await Worker.start(argv[1], stderr=stderr)
    restarted = time.perf_counter()
    try:
        await wait_until(
            store, lambda c: terminal(c) >= done_at, deadline=deadline, alive=alive, polls=polls
        )
        done = time.perf_counter()
    finally:
        worker_stats = await second.stop()
    return _Phases(
        killed_at,
        at_kill.get(PROCESSED, 0),
        at_kill.get(PROCESSING, 0),
        done - killed,
        done - restarted,
        worker_stats,
        killed_stats,
    )


async def run_crash(
    store: str,
    workdir: Path,
    *,
    n: int,
    sleep: float,
    within: float,
    interval: float,
    budget: float,
    settings: dict[str, Any],
) -> CrashResult:
    """Run W3 on `store`, with worker logs and stderr under `workdir`."""
    app = build_app(
        store,
        sleep=sleep,
        within=within,
        complete_within=within,
        **{**settings, "supervisor_interval": interval},
    )
    logs = [workdir / "w3-exec-1.log", workdir / "w3-exec-2.log"]
    argv = tuple(
        worker_argv(store, log, sleep=sleep, within=within, settings=settings) for log in logs
    )
    counter = XactCounter(store) if is_postgres(store) else None
    # The same workflow spec as `app`: a task's complete_within is fixed at submission.
    async with build_app(
        store, sleep=sleep, within=within, complete_within=within, **settings
    ) as submitter:
        before = await submitter.store.count_tasks()
        base_processed = before.get(PROCESSED, 0)
        ids = await submit_all(submitter, n)
        submitted = commits(submitter.store.statistics())
    open_close = 0
    if counter is not None:
        open_close = await open_close_cost(counter, store, settings)
        xacts_before = await counter.read()
    polls = Polls()
    async with app:
        supervisor = asyncio.create_task(app.run(["supervisor"]), name="bench-supervisor")
        try:
            phases = await _kill_and_restart(
                app.store,
                (argv[0], argv[1]),
                stderr=workdir / "w3-workers.stderr",
                kill_at=base_processed + n // 3,
                done_at=terminal(before) + n,
                deadline=time.monotonic() + budget,
                alive=supervisor,
                polls=polls,
            )
        finally:
            supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervisor
        stats = dict(app.store.statistics())
    db_xacts = None
    if counter is not None:
        db_xacts = await counter.read() - xacts_before - polls.n - 3 * open_close
    async with build_app(store, sleep=sleep, **settings) as reader:
        line = await timeline(reader.store, ids)
        # Lost and charged from the tasks themselves: on PostgreSQL the event log
        # shows no event newer than the oldest transaction open anywhere on the
        # server (another client's), so it may not show every `processed` yet.
        tasks_lost = await unprocessed(reader.store, ids)
        tasks_charged = await charged(reader.store, ids)

    runs = executions(logs)
    window = within + STEP_GRACE  # > complete_within (== within here)
    last_reset = max(line.reset.values(), default=phases.killed_at)
    return CrashResult(
        workload="W3",
        n=n,
        step_sleep_s=sleep,
        within_s=within,
        supervisor_interval_s=interval,
        recovery_bound_s=within + interval,
        claim_window_s=window,
        guaranteed_bound_s=window + interval + app.settings.poll_interval,
        processed_at_kill=phases.processed_at_kill - base_processed,
        claimed_at_kill=phases.claimed_at_kill,
        kill_to_done_s=phases.kill_to_done_s,
        restart_to_done_s=phases.restart_to_done_s,
        kill_to_last_reset_s=(last_reset - phases.killed_at).total_seconds(),
        reset_to_processed_max_s=max(spans(line.reset, line.processed), default=0.0),
        processed=n - tasks_lost,
        tasks_lost=tasks_lost,
        tasks_charged=tasks_charged,
        executions=sum(runs.values()),
        distinct_steps=len(runs),
        duplicated_executions=sum(runs.values()) - len(runs),
        resets=line.resets,
        store_stats=stats,
        worker_stats=phases.worker_stats,
        killed_stats=phases.killed_stats,
        commits_per_workflow=per(
            submitted
            + commits(stats)
            + commits(phases.killed_stats)
            + commits(phases.worker_stats),
            n,
        ),
        db_xacts=db_xacts,
        harness_xacts=polls.n,
        open_close_xacts=open_close,
    )


__all__ = ["CrashResult", "Worker", "run_crash"]
