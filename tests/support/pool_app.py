"""An app calling two remote services, for the tests of pools per service.

`shepherd worker --app support.pool_app:app --agents "payments.*"` serves the
payments agents only (with the `tests` directory on PYTHONPATH). Every
execution of an agent appends one JSON line `{"agent", "pid", "task_id", "seq"}`
to the file named by POOL_LOG (when set) and returns its agent and process id,
so a test can tell which process ran each call.
"""

from __future__ import annotations

import json
import os
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

#: The agents, by service.
AGENTS = ("email.send", "payments.charge", "payments.refund")


def build_app(store_url: str | None = None) -> App:
    """The app, on `store_url` (SHEPHERD_STORE when None)."""
    app = App(store_url, alerts=(), poll_interval=0.05, sqlite_synchronous="NORMAL")

    def executed(agent: str) -> Any:
        async def handler(request: AgentRequest) -> Any:
            line = {"agent": agent, "pid": os.getpid(), "task_id": request.task_id}
            log = os.environ.get("POOL_LOG")
            if log:
                fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                try:
                    os.write(fd, (json.dumps({**line, "seq": request.seq}) + "\n").encode())
                finally:
                    os.close(fd)
            return {"agent": agent, "pid": os.getpid()}

        return handler

    for name in AGENTS:
        app.agent(name)(executed(name))

    @app.workflow("checkout")
    async def checkout(ctx: WorkflowContext, order: Any) -> Any:
        charged = await ctx.call("payments.charge", order)
        receipt = await ctx.call("email.send", {"order": order, "kind": "receipt"})
        return [charged, receipt]

    @app.workflow("refund")
    async def refund(ctx: WorkflowContext, order: Any) -> Any:
        refunded = await ctx.call("payments.refund", order)
        notice = await ctx.call("email.send", {"order": order, "kind": "refund"})
        return [refunded, notice]

    return app


app = build_app()
