"""The bench application: one workflow of three sequential steps through one agent.

W1, W4, W6 and lone use the `noop` agent (returns its payload); W2 and W3 use
`remote`, which awaits `sleep` seconds first, as a call to a remote service
would. The `capacity` workload binds `remote` to the resource `bench-db` of
that capacity; `Holders` counts how many handlers hold its slots at once. With an `exec_log`, every completed handler execution appends its
idempotency key to that file (O_APPEND), so duplicated executions can be
counted after a crash.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from shepherd.app import App

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue
    from shepherd.scheduler import WorkflowContext

WORKFLOW = "bench"
STEPS = 3


#: The resource of the `capacity` workload.
RESOURCE = "bench-db"


@dataclass
class Holders:
    """How many handlers use the resource now, and the most at once."""

    now: int = 0
    most: int = 0

    def enter(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


def build_app(
    store: str | None,
    *,
    sleep: float = 0.0,
    within: float | None = None,
    complete_within: float | None = None,
    exec_log: str | None = None,
    capacity: int | None = None,
    holders: Holders | None = None,
    **settings: Any,
) -> App:
    """The bench App on `store` (None: `SHEPHERD_STORE`); `settings` are `Settings` fields.

    With `capacity`, `remote` holds a slot of `bench-db` (declared with that
    capacity) and counts itself in `holders`.
    """
    app = App(store, alerts=(), **settings)
    resource = None
    if capacity is not None:
        resource = RESOURCE
        app.resource(RESOURCE, kind="bench", info={}, capacity=capacity)
    counted = holders or Holders()
    agent = "remote" if sleep > 0 else "noop"
    fd = (
        None
        if exec_log is None
        else os.open(exec_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    )

    if sleep > 0:

        @app.agent("remote", within=within, resource=resource)
        async def remote(req: AgentRequest) -> JsonValue:
            counted.enter()
            try:
                await asyncio.sleep(sleep)
            finally:
                counted.leave()
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
