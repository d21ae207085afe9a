"""The soak's application: `python -m shepherd run --app shepherd.bench.soak_app:app`.

One workflow, `soak`, of three sequential steps through one agent, `remote`,
which awaits a simulated remote call (10 ms by default) and then appends one
line `task_id seq attempt` per execution to an execution log opened with
O_APPEND, so duplicated executions can be counted after SIGKILLs.

A worker process rebuilds the app from its environment: the store and every
other setting from `SHEPHERD_*` variables (`Settings.from_env`), the log path
and the step's duration from `SHEPHERD_SOAK_EXEC_LOG` and `SHEPHERD_SOAK_SLEEP`.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from shepherd.app import App
from shepherd.bench.counts import answer_on_signal

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue
    from shepherd.scheduler import WorkflowContext

WORKFLOW = "soak"
AGENT = "remote"
STEPS = 3
#: The worker's execution log (unset: nothing is logged).
EXEC_LOG_ENV = "SHEPHERD_SOAK_EXEC_LOG"
#: The simulated remote call, in seconds.
SLEEP_ENV = "SHEPHERD_SOAK_SLEEP"
DEFAULT_SLEEP = 0.010


def build_app(*, sleep: float = DEFAULT_SLEEP, exec_log: str | None = None, **settings: Any) -> App:
    """The soak App; `settings` are `Settings` fields (the rest comes from `SHEPHERD_*`)."""
    app = App(alerts=(), **settings)
    fd = (
        None
        if exec_log is None
        else os.open(exec_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    )

    @app.agent(AGENT)
    async def remote(req: AgentRequest) -> JsonValue:
        await asyncio.sleep(sleep)
        if fd is not None:
            # One write(2) per line: O_APPEND keeps lines whole, and the kernel
            # keeps them when the process is SIGKILLed right after.
            os.write(fd, f"{req.task_id} {req.seq} {req.attempt}\n".encode())
        return req.payload

    @app.workflow(WORKFLOW)
    async def soak(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        value = data
        for _ in range(STEPS):
            value = await ctx.call(AGENT, value)
        return value

    return app


def app_from_env() -> App:
    """The soak App of a worker process, from its environment."""
    return build_app(
        sleep=float(os.environ.get(SLEEP_ENV, DEFAULT_SLEEP)),
        exec_log=os.environ.get(EXEC_LOG_ENV) or None,
    )


def __getattr__(name: str) -> App:
    """`shepherd.bench.soak_app:app` builds the app from the environment on first access."""
    if name == "app":
        app = app_from_env()
        answer_on_signal(app)  # the soak counts its commits (`shepherd.bench.counts`)
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
