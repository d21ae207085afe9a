"""A shepherd app whose workflow waits for a signal, run as real processes by the signals' process test.

`python signal_app.py STORE_URL worker` runs a scheduler, an agent worker and a
supervisor, and prints `ready <pid>`. `python signal_app.py STORE_URL send TASK KEY`
sends signal `go` to TASK with idempotency key KEY and prints `sent <id>`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext


def build_app(store_url: str) -> App:
    """The app, on `store_url`; the test process builds the same one to submit and read."""
    app = App(
        store_url,
        supervisor_interval=0.05,
        poll_interval=0.05,
        lease_ttl=0.5,
        sqlite_synchronous="NORMAL",
    )

    @app.agent("noop")
    async def noop(request: AgentRequest) -> Any:
        return request.payload

    @app.workflow("approve")
    async def approve(ctx: WorkflowContext, data: Any) -> Any:
        first = await ctx.call("noop", 1)
        got = await ctx.wait_for("go")
        return [first, got, await ctx.call("noop", os.getpid())]

    return app


async def _send(app: App, task_id: str, key: str) -> None:
    async with app:
        sent = await app.signal(task_id, "go", {"from": os.getpid()}, idempotency_key=key)
    print("sent", sent, flush=True)


if __name__ == "__main__":
    app = build_app(sys.argv[1])
    if sys.argv[2] == "send":
        asyncio.run(_send(app, sys.argv[3], sys.argv[4]))
    else:
        ready = lambda: print("ready", os.getpid(), flush=True)  # noqa: E731
        asyncio.run(app.run(["scheduler", "agent", "supervisor"], ready=ready))
