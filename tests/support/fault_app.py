"""The fault suite's app, run by real worker processes.

    PYTHONPATH=tests python -m shepherd run --app support.fault_app:app --store URL --log-level info

The workflow `chain3` calls the agent `work` three times (`complete_within=5`,
each step `within=3`, the default `max_failures=3`); each execution of the
agent takes about 0.2 s (the remote service) and first appends one JSON line
(task id, seq, attempt, pid) to the file named by `FAULT_APP_LOG`, if set, so a
test can count executions, duplicates included. A process runs at most
`MAX_IN_FLIGHT` workflows at once, so that a few hundred tasks take a few
seconds and a fault lands mid-run. `FAULT_APP_MAX_FAILURES`, if set, is the
workflow's `max_failures` (the expirations it tolerates before `error`).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

__all__ = [
    "COMPLETE_WITHIN",
    "LOG_ENV",
    "MAX_FAILURES_ENV",
    "MAX_IN_FLIGHT",
    "PACE",
    "STEPS",
    "WORKFLOW",
    "app",
    "build_app",
]

WORKFLOW = "chain3"
STEPS = 3
#: Seconds one agent execution takes.
PACE = 0.2
COMPLETE_WITHIN = 5.0
STEP_WITHIN = 3.0
MAX_IN_FLIGHT = 20
#: The environment variable naming the execution log.
LOG_ENV = "FAULT_APP_LOG"
#: The environment variable setting the workflow's `max_failures` (3 by default).
MAX_FAILURES_ENV = "FAULT_APP_MAX_FAILURES"


def build_app(
    store: str | None = None, *, log_path: str | None = None, max_failures: int = 3
) -> App:
    """The app; the test process builds the same one (without a log) to submit tasks."""
    app = App(store, max_in_flight=MAX_IN_FLIGHT)
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
        await asyncio.sleep(PACE)
        return {"seq": request.seq}

    @app.workflow(WORKFLOW, complete_within=COMPLETE_WITHIN, max_failures=max_failures)
    async def chain3(ctx: WorkflowContext, data: Any) -> Any:
        for n in range(1, STEPS + 1):
            await ctx.call("work", {"n": n}, within=STEP_WITHIN)
        return {"steps": STEPS}

    return app


app = build_app(
    log_path=os.environ.get(LOG_ENV), max_failures=int(os.environ.get(MAX_FAILURES_ENV, "3"))
)
