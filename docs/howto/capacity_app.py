"""Capacity: at most 2 handlers use orders-db at once, however many calls wait."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

app = App("sqlite:///capacity.db")
app.resource("orders-db", kind="sqlite", info={"path": "orders.db"}, capacity=2)
using = most = 0


@app.agent("orders.write", resource="orders-db")
async def write(request: AgentRequest) -> Any:
    global using, most
    using += 1
    most = max(most, using)
    await asyncio.sleep(0.05)  # the write itself
    using -= 1
    return {"written": request.payload}


@app.workflow("order")
async def order(ctx: WorkflowContext, data: Any) -> Any:
    return await ctx.call("orders.write", data)


async def main() -> None:
    async with app, app.running():
        ids = [await app.submit("order", {"n": n}) for n in range(10)]
        for task_id in ids:
            await app.result(task_id, timeout=30)
    print(f"10 orders written, at most {most} at once")


asyncio.run(main())
