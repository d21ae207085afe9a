import asyncio
import contextlib
from collections import Counter

from shepherd import App, PermanentError, TaskFailedError

app = App("sqlite:///parallel.db", alerts=())
both_called = asyncio.Barrier(2)  # reserve and charge each wait for the other
handled = Counter()  # how many times each stand-in service was called


@app.agent("inventory.reserve", within=5)
async def reserve(request):
    handled["inventory.reserve"] += 1
    await both_called.wait()  # returns only because charge runs at the same time
    return {"reservation": "R-" + request.payload["id"]}


@app.agent("inventory.release")
async def release(request):
    handled["inventory.release"] += 1


@app.agent("payments.charge", within=5)
async def charge(request):
    handled["payments.charge"] += 1
    await both_called.wait()
    if request.payload["card"] == "declined":
        raise PermanentError("card declined")
    return {"charge_id": "C-" + request.payload["id"]}


@app.agent("payments.refund")
async def refund(request):
    handled["payments.refund"] += 1


@app.agent("shipping.create", within=1)
async def ship(request):
    handled["shipping.create"] += 1
    order = request.payload["order"]
    if order["address"] == "nowhere":
        raise PermanentError("no such address")
    if order["address"] == "slow" and request.attempt == 1:
        await asyncio.sleep(3600)  # the first attempt hangs: the task is reset
    return {"tracking": "T-" + order["id"]}


@app.workflow("orders.process")
async def process(ctx, order):
    stock, paid = await asyncio.gather(
        ctx.call("inventory.reserve", order, undo="inventory.release"),  # step 1
        ctx.call("payments.charge", order, undo="payments.refund"),  # step 2
    )
    shipment = {"order": order, "stock": stock, "charge": paid}
    return await ctx.call("shipping.create", shipment)  # step 3


async def main():
    async with app.running():
        for order in (
            {"id": "A-1", "card": "ok", "address": "Main St 1"},
            {"id": "A-2", "card": "declined", "address": "Main St 2"},
            {"id": "A-3", "card": "ok", "address": "slow"},
            {"id": "A-4", "card": "ok", "address": "nowhere"},
        ):
            handled.clear()
            task_id = await app.submit("orders.process", order, key=order["id"])
            with contextlib.suppress(TaskFailedError):  # if undone, its steps say how
                await app.result(task_id, timeout=30)
            task = await app.get_task(task_id)
            print(order["id"], task.process_state, dict(sorted(handled.items())))
            for s in task.steps:
                undoes = f" (undoes step {s.compensates})" if s.compensates else ""
                print(f"  {s.seq} {s.agent:17} {s.state:11} attempt {s.attempt}{undoes}")


if __name__ == "__main__":
    asyncio.run(main())
