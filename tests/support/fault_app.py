"""The fault suite's app, run by real worker processes.

    PYTHONPATH=tests python -m shepherd run --app support.fault_app:app --store URL --log-level info

The workflow `chain3` calls the agent `work` three times. How it runs is a
`Profile`, passed to the worker processes as JSON in `FAULT_APP_PROFILE` (the
test process builds the same app with the same profile to submit, since a
task's `complete_within` is fixed at submission). The default profile: a
claim's window `complete_within=5`, each step `within=3`, `max_failures=1` (a
single charged failure ends a task: the suite asserts none is ever charged),
each execution of the agent taking 0.2 s (the remote service), and at most
`max_in_flight=20` workflows at once in a process, so that a few hundred tasks
take a few seconds and a fault lands mid-run. A profile may give the agent a
pace range instead (`pace=(0.05, 0.5)`): each step then takes a duration drawn
from its task id and seq, the same at every execution of that step.

Each execution first appends one JSON line (task id, seq, attempt, pid) to the
file named by `FAULT_APP_LOG`, if set, so a test can count executions,
duplicates included.

A test-only freeze: with `FAULT_APP_FREEZE_MARK=<path>` in its environment, a
worker process on a SQLite store stops itself (SIGSTOP) inside a write
transaction, once, after it receives SIGUSR1: the next data-changing statement
that any of its store connections runs while a transaction is open (after
`BEGIN IMMEDIATE`, so while the process holds the writers' turn and SQLite's
write lock) first writes one JSON line to `<path>` (its pid and the statement)
and then stops the whole process. The test sees the line, waits the freeze
out, and sends SIGCONT; the statement then runs and the transaction goes on.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import threading
import traceback
from dataclasses import asdict, dataclass
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

__all__ = [
    "COMPLETE_WITHIN",
    "FREEZE_ENV",
    "LOG_ENV",
    "MAX_IN_FLIGHT",
    "PACE",
    "PROFILE_ENV",
    "STEPS",
    "WORKFLOW",
    "Profile",
    "app",
    "build_app",
]

WORKFLOW = "chain3"
STEPS = 3
#: Seconds one agent execution takes (the default profile).
PACE = 0.2
COMPLETE_WITHIN = 5.0
STEP_WITHIN = 3.0
MAX_IN_FLIGHT = 20
#: The environment variable naming the execution log.
LOG_ENV = "FAULT_APP_LOG"
#: The environment variable holding the profile, as JSON.
PROFILE_ENV = "FAULT_APP_PROFILE"
#: The environment variable naming the freeze marker file (see the module docstring).
FREEZE_ENV = "FAULT_APP_FREEZE_MARK"


@dataclass(frozen=True)
class Profile:
    """How the app runs: its workflow's policy, its pace, its concurrency."""

    #: The claim's window, seconds.
    complete_within: float = COMPLETE_WITHIN
    #: Each step's deadline, seconds.
    step_within: float = STEP_WITHIN
    #: Expirations tolerated (the workflow's `max_failures`).
    max_failures: int = 1
    #: Most workflows at once in one process.
    max_in_flight: int = MAX_IN_FLIGHT
    #: Seconds one execution takes: the least and the most (equal: a fixed pace).
    pace: tuple[float, float] = (PACE, PACE)

    def env(self) -> dict[str, str]:
        """The environment entry that gives this profile to a worker process."""
        return {PROFILE_ENV: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] | None = None) -> Profile:
        raw = (os.environ if env is None else env).get(PROFILE_ENV)
        if not raw:
            return cls()
        fields = json.loads(raw)
        fields["pace"] = tuple(fields["pace"])
        return cls(**fields)

    def step_seconds(self, task_id: str, seq: int) -> float:
        """How long step `seq` of `task_id` takes, the same at every execution."""
        least, most = self.pace
        if least == most:
            return least
        return random.Random(f"{task_id}/{seq}").uniform(least, most)


def build_app(
    store: str | None = None, *, log_path: str | None = None, profile: Profile | None = None
) -> App:
    """The app; the test process builds the same one (without a log) to submit tasks."""
    profile = profile or Profile()
    app = App(store, max_in_flight=profile.max_in_flight)
    log_fd = (
        None if not log_path else os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    )

    @app.agent("work")
    async def work(request: AgentRequest) -> Any:
        if log_fd is not None:
            line = {
                "task_id": request.task_id,
                "seq": request.seq,
                "attempt": request.attempt,
                "pid": os.getpid(),
            }
            os.write(log_fd, (json.dumps(line) + "\n").encode())  # one write: one whole line
        await asyncio.sleep(profile.step_seconds(request.task_id, request.seq))
        return {"seq": request.seq}

    @app.workflow(
        WORKFLOW, complete_within=profile.complete_within, max_failures=profile.max_failures
    )
    async def chain3(ctx: WorkflowContext, data: Any) -> Any:
        for n in range(1, STEPS + 1):
            await ctx.call("work", {"n": n}, within=profile.step_within)
        return {"steps": STEPS}

    return app


# -- the test-only freeze inside a SQLite write transaction -----------------------------

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _install_freeze(mark: str) -> None:
    """Arm on SIGUSR1; then stop this process inside the next write transaction."""
    armed = threading.Event()
    fired = threading.Lock()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def on_statement(statement: str) -> None:
            if not armed.is_set() or not conn.in_transaction:
                return
            if not statement.lstrip().upper().startswith(_WRITES):
                return
            if not fired.acquire(blocking=False):
                return  # once only
            armed.clear()
            # Which thread, from where: for a test's message should the turn not be its own.
            line = {
                "pid": os.getpid(),
                "statement": statement[:200],
                "thread": threading.current_thread().name,
                "stack": "".join(traceback.format_stack(limit=12)),
            }
            fd = os.open(mark, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)
            os.kill(os.getpid(), signal.SIGSTOP)  # every thread stops here, mid-transaction

        conn.set_trace_callback(on_statement)
        return conn

    sqlite3.connect = traced  # type: ignore[assignment]
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: armed.set())


if os.environ.get(FREEZE_ENV):
    _install_freeze(os.environ[FREEZE_ENV])

app = build_app(log_path=os.environ.get(LOG_ENV), profile=Profile.from_env())
