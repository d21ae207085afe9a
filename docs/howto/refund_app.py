"""Charge an order; when the order is undone, refund its charge, even one whose outcome is unknown."""

import os
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext
from shepherd.agents.http import call_http, http_agent

PAYMENTS = os.environ.get("PAYMENTS_URL", "http://payments")

app = App()

# POST /charges with the order as its body and the step's key as `Idempotency-Key`.
http_agent(app, "payments.charge", "POST", f"{PAYMENTS}/charges", within=10)


@app.agent("payments.refund", within=10)
async def refund(request: AgentRequest) -> Any:
    undo = request.payload  # the charge step's request, result, seq, idempotency_key, outcome
    if undo["outcome"] == "completed":
        charges = [undo["result"]]
    else:
        # "unknown": the charge's process died mid-call, so no result was recorded,
        # yet the service may have charged. It filed any charge under the key the
        # charge step sent, which names that step alone: ask it.
        charges = await call_http(
            app,
            request,
            "GET",
            f"{PAYMENTS}/charges",
            params={"idempotency_key": undo["idempotency_key"]},
        )
    for charge in charges:  # none: nothing was charged, nothing to refund
        await call_http(app, request, "POST", f"{PAYMENTS}/charges/{charge['id']}/refund")
    return {"refunded": [charge["id"] for charge in charges]}


@app.workflow("orders.pay")
async def pay(ctx: WorkflowContext, order: Any) -> Any:
    return await ctx.call("payments.charge", order, undo="payments.refund")
