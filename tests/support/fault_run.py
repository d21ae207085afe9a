"""The fault suite's harness: real workers, a workload, a fault mid-run, and the checks.

A `FaultRun` starts `shepherd run` workers (`support.fault_app`), submits a few
hundred three-step workflows, waits (polling the store) until about half the
steps have run, lets the test inject its fault, then checks from the store and
the logs, never from wall-clock timings:

- every task ends `processed`, and every id a submit returned is among them;
- duplicate executions (from the agents' execution log) stay within a bound
  the test gives: at most one per task unfinished at the fault;
- no worker process exited (each one's stderr is quoted when one did);

and prints the time from the fault's end to all done (with -s; it is also in
every assertion message), as a figure to read, not one to assert.

The store is observed through fresh connections of the test's own (`Observer`),
so that an observation never depends on the code under test, and a failed one
(the server is down) is simply retried at the next poll.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, final

import psycopg

from support.fault_app import LOG_ENV, STEPS, WORKFLOW
from support.processes import Worker, start_process

if TYPE_CHECKING:
    from shepherd import App

__all__ = [
    "APP_SPEC",
    "FaultRun",
    "Observer",
    "PostgresObserver",
    "SQLiteObserver",
    "owner_pid",
    "spawn_shepherd",
    "stderr_of",
]

TESTS = Path(__file__).resolve().parents[1]
APP_SPEC = "support.fault_app:app"
#: States a task does not leave.
FINAL_STATES = ("processed", "error", "compensated", "cancelled")
#: Backstops for each wait (not timing claims).
PROGRESS_PATIENCE = 45.0
DONE_PATIENCE = 60.0
READY_PATIENCE = 30.0
POLL = 0.1


def owner_pid(owner: str) -> int:
    """The pid inside a role instance name, `host:pid:suffix/role`."""
    return int(owner.split("/")[0].split(":")[1])


def stderr_of(workers: Sequence[Worker], tail: int = 3000) -> str:
    """Each worker's state and the end of its stderr, for failure messages."""
    parts = []
    for w in workers:
        code = w.process.poll()
        state = "alive" if code is None else f"EXITED with code {code}"
        parts.append(f"\n--- {w.name} (pid {w.pid}, {state}) stderr:\n{w.stderr(tail)}")
    return "".join(parts)


def spawn_shepherd(
    store_url: str,
    workdir: Path,
    *,
    name: str,
    log_path: Path,
    prefix: Sequence[str] = (),
    ready_timeout: float = READY_PATIENCE,
    env: Mapping[str, str] | None = None,
) -> Worker:
    """Start `python -m shepherd run --app support.fault_app:app` and wait for its readiness line.

    Args:
        store_url: The store the worker opens.
        workdir: Where its stderr file (`<name>.stderr`) goes.
        name: For messages and the file name.
        log_path: The agents' execution log (shared by every worker of a test).
        prefix: An argv prefix, e.g. `ip netns exec NS` to run it on another "host".
        ready_timeout: Seconds to wait for `shepherd ready:`.
        env: Variables for the worker (`SHEPHERD_*` settings, the app's options),
            over this process's environment, whose `SHEPHERD_*` variables are dropped.
    """
    argv = [
        *prefix,
        sys.executable,
        "-m",
        "shepherd",
        "run",
        "--app",
        APP_SPEC,
        "--store",
        store_url,
        "--log-level",
        "info",
    ]
    given = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    env[LOG_ENV] = str(log_path)
    env.update(given)
    return start_process(argv, workdir, name=name, env=env, ready_timeout=ready_timeout)


# -- observing the store --------------------------------------------------------------


class Observer(Protocol):
    """Reads the store with the test's own connections; None when it cannot now."""

    async def rows(
        self, query: str, params: Sequence[Any] = ()
    ) -> list[tuple[Any, ...]] | None: ...


@final
class PostgresObserver:
    """One fresh connection per read, so a restart or a cut costs one failed read."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        try:
            async with asyncio.timeout(15):
                conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=3
                )
                async with conn:
                    cursor = await conn.execute(query.replace("?", "%s"), params)
                    return await cursor.fetchall()
        except (psycopg.Error, OSError, TimeoutError):
            return None


@final
class SQLiteObserver:
    """Queries on the store file (reads only), one connection each, in a thread."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _rows(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]] | None:
        try:
            conn = sqlite3.connect(self.path, timeout=5)
        except sqlite3.Error:
            return None
        try:
            return conn.execute(query, tuple(params)).fetchall()
        except sqlite3.Error:
            return None
        finally:
            conn.close()

    async def rows(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        return await asyncio.to_thread(self._rows, query, params)


# -- the run ------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """The store at a fault's start."""

    unprocessed: int
    running_steps: int


@final
@dataclass
class FaultRun:
    """One workload through one fault. See the module docstring."""

    #: The fault, in words, for the report.
    fault: str
    app: App
    observer: Observer
    store_url: str
    workdir: Path
    #: Every worker started (the `workers()` list that kills them all at the end).
    running: list[Worker]
    #: The workers that must be alive at the end.
    watched: list[Worker] = field(default_factory=list)
    #: Every id a submit returned.
    ids: list[str] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    fault_ended_at: float | None = None
    #: Seconds from the fault's end to all done.
    recovery: float | None = None
    #: Exceptions submits raised (retried under the same key), by class and message.
    refused: list[str] = field(default_factory=list)
    #: Lines for the report, added by the test.
    notes: list[str] = field(default_factory=list)
    #: Tasks acknowledged by `trickle` (submitted around the fault).
    trickled: int = 0

    @property
    def log(self) -> Path:
        """The agents' execution log."""
        return self.workdir / "executions.jsonl"

    # -- workers and work ------------------------------------------------------------------
    async def start_workers(
        self,
        names: Sequence[str],
        *,
        prefixes: Sequence[Sequence[str]] = (),
        urls: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> list[Worker]:
        """Start one worker per name, at once (each with `env`); they are watched (must stay alive)."""
        outcomes = await asyncio.gather(
            *(
                asyncio.to_thread(
                    spawn_shepherd,
                    urls[i] if urls else self.store_url,
                    self.workdir,
                    name=name,
                    log_path=self.log,
                    prefix=prefixes[i] if prefixes else (),
                    env=env,
                )
                for i, name in enumerate(names)
            ),
            return_exceptions=True,
        )
        started = [w for w in outcomes if isinstance(w, Worker)]
        self.running += started
        self.watched += started
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return started

    async def submit(self, count: int, *, tag: str = "load") -> list[str]:
        """Submit `count` workflows through the app; every returned id is acknowledged."""
        ids = list(
            await asyncio.gather(
                *(self.app.submit(WORKFLOW, {"tag": tag, "i": i}) for i in range(count))
            )
        )
        self.ids += ids
        return ids

    # -- observations ----------------------------------------------------------------------
    async def counts(self) -> dict[str, int] | None:
        rows = await self.observer.rows(
            "SELECT process_state, count(*) FROM tasks GROUP BY process_state"
        )
        return None if rows is None else {str(state): int(n) for state, n in rows}

    async def completed_steps(self) -> int | None:
        rows = await self.observer.rows("SELECT count(*) FROM steps WHERE state = 'completed'")
        return None if rows is None else int(rows[0][0])

    async def states(self) -> dict[str, str] | None:
        rows = await self.observer.rows("SELECT id, process_state FROM tasks")
        return None if rows is None else {str(i): str(s) for i, s in rows}

    async def claims_by_pid(self, task_ids: Sequence[str] | None = None) -> Counter[int]:
        """Claims (from the `claimed` events) per owning process."""
        rows = await self.observer.rows("SELECT task_id, detail FROM events WHERE kind = 'claimed'")
        assert rows is not None, "the store could not be read"
        wanted = None if task_ids is None else set(task_ids)
        return Counter(
            owner_pid(json.loads(detail)["owner"])
            for task_id, detail in rows
            if wanted is None or task_id in wanted
        )

    def describe_workers(self) -> str:
        return stderr_of(self.running)

    def all_dead(self) -> bool:
        return bool(self.watched) and not any(w.alive() for w in self.watched)

    async def wait_for(
        self, what: str, ready: Callable[[], Awaitable[bool]], patience: float
    ) -> None:
        """Poll `ready()` until true; fail after `patience` s, or at once if every worker died."""
        deadline = time.monotonic() + patience
        while True:
            if await ready():
                return
            if self.all_dead():
                raise AssertionError(
                    f"[{self.fault}] every worker exited while waiting for {what}; "
                    f"tasks: {await self.counts()}{self.report_tail()}{self.describe_workers()}"
                )
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"[{self.fault}] not {what} within {patience:.0f} s; tasks: "
                    f"{await self.counts()}{self.report_tail()}{self.describe_workers()}"
                )
            await asyncio.sleep(POLL)

    async def wait_progress(self, fraction: float = 0.5) -> None:
        """Wait until `fraction` of all the steps of the submitted tasks have completed."""
        target = int(len(self.ids) * STEPS * fraction)

        async def reached() -> bool:
            done = await self.completed_steps()
            return done is not None and done >= target

        await self.wait_for(f"{target} steps completed", reached, PROGRESS_PATIENCE)

    async def fault_starts(self) -> Snapshot:
        """Record the store as the fault starts: tasks unfinished, steps in flight."""
        counts = None
        steps = None
        for _ in range(50):
            counts = await self.counts()
            steps = await self.observer.rows("SELECT count(*) FROM steps WHERE state = 'running'")
            if counts is not None and steps is not None:
                break
            await asyncio.sleep(POLL)
        assert counts is not None, "the store could not be read before the fault"
        assert steps is not None, "the store could not be read before the fault"
        snapshot = Snapshot(
            unprocessed=sum(n for state, n in counts.items() if state != "processed"),
            running_steps=int(steps[0][0]),
        )
        assert snapshot.unprocessed > 0, f"[{self.fault}] the fault must land mid-run: {counts}"
        self.snapshots.append(snapshot)
        return snapshot

    def fault_ends(self) -> None:
        self.fault_ended_at = time.monotonic()

    async def wait_done(self, patience: float = DONE_PATIENCE, *, timed: bool = True) -> None:
        """Wait until every acknowledged task is in a final state; time the recovery.

        Args:
            patience: Seconds before failing.
            timed: Record the time from the fault's end as the recovery (False
                for a later wait, for work submitted after the recovery).
        """
        assert self.fault_ended_at is not None, "fault_ends() first"
        wanted = set(self.ids)

        async def done() -> bool:
            states = await self.states()
            if states is None or not wanted <= states.keys():
                return False
            return all(states[i] in FINAL_STATES for i in wanted)

        await self.wait_for("all tasks done", done, patience)
        if timed:
            self.recovery = time.monotonic() - self.fault_ended_at

    # -- checks ------------------------------------------------------------------------------
    def executions(self) -> Counter[tuple[str, int]]:
        """Executions per (task id, seq), from every worker's lines in the log."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return Counter((e["task_id"], int(e["seq"])) for e in map(json.loads, lines))

    def report_tail(self) -> str:
        recovery = "n/a" if self.recovery is None else f"{self.recovery:.1f} s"
        if self.fault_ended_at is not None and self.recovery is None:
            recovery = (
                f"not done {time.monotonic() - self.fault_ended_at:.1f} s after the fault's end"
            )
        snaps = "; ".join(
            f"{s.unprocessed} tasks unfinished, {s.running_steps} steps running"
            for s in self.snapshots
        )
        lines = [
            f"\n[{self.fault}]",
            f"  at the fault: {snaps or 'n/a'}",
            f"  from the fault's end to all done: {recovery}",
            *(f"  {note}" for note in self.notes),
        ]
        if self.refused:
            kinds = Counter(self.refused)
            lines.append(
                f"  submits refused during the fault ({len(self.refused)}): "
                + "; ".join(f"{n} x {k}" for k, n in kinds.most_common(5))
            )
        return "\n".join(lines)

    async def verify(self, *, duplicate_bound: int | None = None) -> None:
        """Every acknowledged task processed, duplicates bounded, every watched worker alive."""
        states = await self.states()
        assert states is not None, "the store could not be read"
        missing = [i for i in self.ids if i not in states]
        executions = self.executions()
        duplicates = sum(n - 1 for n in executions.values())
        if duplicate_bound is None:
            # One re-execution per task unfinished at each fault (its step in flight),
            # counting the tasks submitted through the fault as unfinished.
            duplicate_bound = sum(s.unprocessed for s in self.snapshots) + self.trickled
        bound = duplicate_bound
        self.notes.append(
            f"tasks: {len(self.ids)} acknowledged; states {dict(Counter(states.values()))}"
        )
        self.notes.append(
            f"executions: {sum(executions.values())} for {len(executions)} steps: "
            f"{duplicates} duplicates (bound {bound}: one per task unfinished at the fault)"
        )
        alive = [w for w in self.watched if w.alive()]
        self.notes.append(f"workers alive at the end: {len(alive)} of {len(self.watched)}")
        report = self.report_tail()
        print(report)
        assert not missing, f"acknowledged submits lost: {missing[:10]}{report}"
        not_processed = Counter(states[i] for i in self.ids if states[i] != "processed")
        assert not not_processed, (
            f"tasks not processed: {dict(not_processed)}{report}{self.describe_workers()}"
        )
        never = [
            (i, seq) for i in self.ids for seq in range(1, STEPS + 1) if (i, seq) not in executions
        ]
        assert not never, f"steps recorded without an execution in the log: {never[:5]}{report}"
        assert duplicates <= bound, f"{duplicates} duplicate executions, more than {bound}{report}"
        dead = [w for w in self.watched if not w.alive()]
        assert not dead, (
            f"worker processes exited: {', '.join(f'{w.name} ({w.process.poll()})' for w in dead)}"
            f"{report}{self.describe_workers()}"
        )

    # -- submits through the fault -------------------------------------------------------------
    @asynccontextmanager
    async def trickle(self, *, after: int = 3, patience: float = 45.0) -> AsyncIterator[None]:
        """Keep submitting, one task at a time, through the block (the fault).

        Each submit that raises is retried under the same `key` until it is
        acknowledged, so a submit whose commit was cut off is not doubled. On
        leaving the block, waits for `after` more acknowledged submits (the
        app's submits work again after the fault), then stops.
        """
        acknowledged: list[float] = []
        stop = asyncio.Event()

        async def submit_one(n: int) -> str:
            deadline = time.monotonic() + patience
            while True:
                try:
                    async with asyncio.timeout(30):
                        return await self.app.submit(
                            WORKFLOW, {"tag": "trickle", "i": n}, key=f"trickle-{n}"
                        )
                except Exception as exc:
                    first = str(exc).splitlines()[0] if str(exc) else ""
                    self.refused.append(
                        f"{type(exc).__module__}.{type(exc).__name__}: {first}"[:200]
                    )
                    if time.monotonic() >= deadline:
                        raise AssertionError(
                            f"[{self.fault}] a submit kept failing for {patience:.0f} s: {exc!r}"
                            f"{self.report_tail()}"
                        ) from exc
                await asyncio.sleep(0.2)  # the retry's pace

        async def run() -> None:
            n = 0
            while not stop.is_set():
                self.ids.append(await submit_one(n))
                acknowledged.append(time.monotonic())
                n += 1
                await asyncio.sleep(0.1)  # the load's pace: about ten submits a second

        job = asyncio.create_task(run())
        try:
            yield
            assert self.fault_ended_at is not None, "fault_ends() inside the block"
            end = self.fault_ended_at

            async def resumed() -> bool:
                if job.done():
                    job.result()  # raises what stopped it
                return sum(1 for at in acknowledged if at > end) >= after

            await self.wait_for(f"{after} submits acknowledged after the fault", resumed, patience)
            stop.set()
            await job  # it ends after its current submit
        finally:
            if not job.done():
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)
        self.trickled += len(acknowledged)
        self.notes.append(
            f"submits through the fault: {len(acknowledged)} acknowledged, "
            f"{len(self.refused)} refused and retried under the same key"
        )
