"""Signals: an order waits for a person's approval, with a timeout, holding no claim."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, SignalTimeoutError, WorkflowContext

app = App("sqlite:///signals.db")


@app.agent("stock.reserve")
async def reserve(request: AgentRequest) -> Any:
    return f"reserved {request.payload['item']}"


@app.agent("orders.ship")
async def ship(request: AgentRequest) -> Any:
    return f"shipped {request.payload['item']} ({request.payload['note']})"


@app.workflow("order.approve")
async def approve(ctx: WorkflowContext, data: Any) -> Any:
    await ctx.call("stock.reserve", data)
    try:
        # The task gives up its claim until a signal "approval" comes, or the timeout.
        decision = await ctx.wait_for("approval", timeout=data["timeout"])
    except SignalTimeoutError:
        return "not approved in time"  # the workflow decides what a timeout means
    if not decision["approved"]:
        return f"refused by {decision['by']}"
    return await ctx.call("orders.ship", {"item": data["item"], "note": decision["by"]})


async def main() -> None:
    async with app, app.running():
        ann = await app.submit("order.approve", {"item": "lamp", "timeout": 3600}, key="A-1")
        # From plain code (a webhook, a form): by the task's key and workflow, or by its id.
        # The same idempotency key twice (a retried webhook) is one signal.
        for _ in range(2):
            await app.signal(
                "A-1",
                "approval",
                {"approved": True, "by": "ann"},
                workflow="order.approve",
                idempotency_key="mail-771",
            )
        print(await app.result(ann, timeout=10))

        bob = await app.submit("order.approve", {"item": "desk", "timeout": 0.5})
        print(await app.result(bob, timeout=10))

        cid = await app.submit("order.approve", {"item": "sofa", "timeout": 3600})
        await app.signal(cid, "approval", {"approved": False, "by": "cid"})  # before the wait
        print(await app.result(cid, timeout=10))
        signals = await app.operations.signals.of(ann)
        print([(s.name, s.payload, s.consumed_seq) for s in signals])


if __name__ == "__main__":
    asyncio.run(main())
