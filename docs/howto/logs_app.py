"""An order whose charge step has a bug: the task goes to `error`."""

from typing import Any

from shepherd import AgentRequest, App, RetryPolicy, WorkflowContext

app = App()

quick = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.01)


@app.agent("payments.charge", retry=quick)
async def charge(request: AgentRequest) -> Any:
    return {"charged": request.payload["card"]}  # a bug: no card, KeyError


@app.workflow("orders.pay")
async def pay(ctx: WorkflowContext, data: Any) -> Any:
    return await ctx.call("payments.charge", data)
