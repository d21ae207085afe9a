"""The bench application: one workflow of three sequential steps through one agent.

W1, W4, W6 and lone use the `noop` agent (returns its payload); W2 and W3 use
`remote`, which awaits `sleep` seconds first, as a call to a remote service
would. With an `exec_log`, every completed handler execution appends its
idempotency key to that file (O_APPEND), so duplicated executions can be
counted after a crash.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from shepherd.app import App

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue
    from shepherd.scheduler import WorkflowContext

WORKFLOW = "bench"
STEPS = 3


def build_app(
    store: str | None,
    *,
    sleep: float = 0.0,
    within: float | None = None,
    complete_within: float | None = None,
    exec_log: str | None = None,
    **settings: Any,
) -> App:
    """The bench App on `store` (None: `SHEPHERD_STORE`); `settings` are `Settings` fields."""
    app = App(store, alerts=(), **settings)
    agent = "remote" if sleep > 0 else "noop"
    fd = (
        None
        if exec_log is None
        else os.open(exec_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    )

    if sleep > 0:

        @app.agent("remote", within=within)
        async def remote(req: AgentRequest) -> JsonValue:
            await asyncio.sleep(sleep)
            if fd is not None:
                os.write(fd, f"{req.idempotency_key}\n".encode())
            return req.payload

    else:

        @app.agent("noop", within=within)
        async def noop(req: AgentRequest) -> JsonValue:
            if fd is not None:
                os.write(fd, f"{req.idempotency_key}\n".encode())
            return req.payload

    @app.workflow(WORKFLOW, complete_within=complete_within)
    async def bench(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        value = data
        for _ in range(STEPS):
            value = await ctx.call(agent, value)
        return value

    return app


async def submit_all(app: App, n: int, *, chunk: int = 1000) -> list[str]:
    """Submit `n` bench workflows, `chunk` at a time so group commit batches them."""
    ids: list[str] = []
    for start in range(0, n, chunk):
        batch = range(start, min(n, start + chunk))
        ids.extend(await asyncio.gather(*(app.submit(WORKFLOW, {"i": i}) for i in batch)))
    return ids
