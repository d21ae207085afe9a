"""A shepherd app whose `order` starts two `shipment` children, run as a real process.

Run as a script: `python child_app.py STORE_URL [--hang]`. It prints
`ready <pid>` once its scheduler and supervisor run. `order` starts one child
(`start_workflow`), awaits another (`run_workflow`), then calls `hold`, which
never returns in a process started with `--hang`: the test SIGKILLs that
process while the parent holds its claim, both children started.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext


def build_app(store_url: str, *, hang: bool = False) -> App:
    """The app, on `store_url`; the test process builds the same one to submit and read."""
    app = App(
        store_url,
        supervisor_interval=0.05,
        poll_interval=0.05,
        lease_ttl=0.5,
        sqlite_synchronous="NORMAL",
    )

    @app.agent("hold", within=1.0)
    async def hold(request: AgentRequest) -> Any:
        if hang:
            await asyncio.Event().wait()
        return os.getpid()

    @app.workflow("shipment")
    async def shipment(ctx: WorkflowContext, data: Any) -> Any:
        return f"shipped {data}"

    @app.workflow("order", complete_within=1.0)
    async def order(ctx: WorkflowContext, data: Any) -> Any:
        started = await ctx.start_workflow("shipment", f"{data}a")
        awaited = await ctx.run_workflow("shipment", f"{data}b")
        return [started, awaited, await ctx.call("hold", data)]

    return app


if __name__ == "__main__":
    app = build_app(sys.argv[1], hang="--hang" in sys.argv[2:])
    ready = lambda: print("ready", os.getpid(), flush=True)  # noqa: E731
    asyncio.run(app.run(["scheduler", "agent", "supervisor"], ready=ready))
