"""An app that traces its tasks, for the tracing test across processes.

OpenTelemetry is configured when the module is imported, the standard way:
`shepherd worker --app support.traced_app:app` and `shepherd submit --app
support.traced_app:app` (with the `tests` directory on PYTHONPATH) each write
their spans, one JSON line each, to the file TRACE_FILE names. The checkout
calls two services, whose agents a test runs in different processes
(`--agents "payments.*"`, `--agents "email.*"`); an order with `"decline"`
is refused by the payments agent.
"""

from __future__ import annotations

import os
from typing import Any

from shepherd import AgentRequest, App, PermanentError, WorkflowContext
from support.spans import span_file

if os.environ.get("TRACE_FILE"):
    span_file(os.environ["TRACE_FILE"])

app = App(alerts=(), poll_interval=0.05, sqlite_synchronous="NORMAL")


@app.agent("payments.charge")
async def charge(request: AgentRequest) -> Any:
    if request.payload.get("decline"):
        raise PermanentError("card declined")
    return {"charged": request.payload["order"], "pid": os.getpid()}


@app.agent("email.send")
async def send(request: AgentRequest) -> Any:
    return {"sent": request.payload["order"], "pid": os.getpid()}


@app.workflow("checkout")
async def checkout(ctx: WorkflowContext, order: Any) -> Any:
    charged = await ctx.call("payments.charge", order)
    sent = await ctx.call("email.send", order)
    return [charged, sent]
