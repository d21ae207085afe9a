"""Child workflows: an order starts a shipment child and awaits its result."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, PermanentError, TaskFailedError, WorkflowContext

app = App("sqlite:///children.db")


@app.agent("stock.reserve")
async def reserve(request: AgentRequest) -> Any:
    return f"reserved {request.payload}"


@app.agent("stock.release")
async def release(request: AgentRequest) -> Any:
    print(f"  undo: released {request.payload['request']}")


@app.agent("carrier.book")
async def book(request: AgentRequest) -> Any:
    if request.payload == "moon":
        raise PermanentError("no carrier goes to the moon")
    return f"parcel to {request.payload}"


@app.agent("mail.send")
async def send(request: AgentRequest) -> Any:
    return f"mailed {request.payload}"


@app.workflow("shipment")
async def shipment(ctx: WorkflowContext, data: Any) -> Any:
    return await ctx.call("carrier.book", data["to"])


@app.workflow("receipt")
async def receipt(ctx: WorkflowContext, data: Any) -> Any:
    return await ctx.call("mail.send", data)


@app.workflow("order")
async def order(ctx: WorkflowContext, data: Any) -> Any:
    await ctx.call("stock.reserve", data["item"], undo="stock.release")
    # Not awaited: the receipt goes on even if the order ends first.
    await ctx.start_workflow("receipt", data["item"], on_parent_end="continue")
    # Awaited, two in parallel: the order waits holding no claim.
    return await asyncio.gather(
        *(ctx.run_workflow("shipment", {"to": to}) for to in data["to"])
    )


async def main() -> None:
    async with app, app.running():
        good = await app.submit("order", {"item": "lamp", "to": ["Oslo", "Rome"]})
        print(await app.result(good, timeout=10))
        children = [(s.seq, s.agent, str(s.state)) for s in (await app.get_task(good)).steps[1:]]
        print(children)

        bad = await app.submit("order", {"item": "desk", "to": ["Oslo", "moon"]})
        try:
            await app.result(bad, timeout=10)
        except TaskFailedError as failed:
            print(failed.state, "-", failed.error["reason"].replace(bad, "<order>"))
        print("its receipt:", await app.result(f"{bad}.2", timeout=10))


if __name__ == "__main__":
    asyncio.run(main())
