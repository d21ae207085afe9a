"""Orders: each user's ledger has one owner, the stock database takes 2 writers, a refusal is undone."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, Batch, PermanentError, TaskFailedError, WorkflowContext

app = App("sqlite:///orders.db")
app.resource("orders-db", kind="sqlite", info={"path": "stock.db"}, capacity=2)
stock = {"book": 10, "lamp": 10}  # the database's table, kept in memory here
reservations: dict[str, str] = {}  # step key -> item: a reservation is made once
writers = most_writers = 0


@app.agent("ledger.append", exclusive_by="user", batch=Batch(max_items=50, max_delay=0.01))
async def append(requests: list[AgentRequest]) -> list[int]:
    """One user's ledger: one handling at a time per user, a batch of that user's orders."""
    first = requests[0]
    count = (first.owner_state or {"orders": 0})["orders"]
    numbers = list(range(count + 1, count + 1 + len(requests)))
    first.owner_state = {"orders": numbers[-1]}  # committed with these replies
    return numbers  # each order's number in its user's ledger


async def write(change: Any) -> None:
    """One write to the stock database (at most 2 at once: orders-db's capacity)."""
    global writers, most_writers
    writers += 1
    most_writers = max(most_writers, writers)
    await asyncio.sleep(0.05)  # the write itself
    change()
    writers -= 1


@app.agent("stock.reserve", resource="orders-db")
async def reserve(request: AgentRequest) -> Any:
    item = request.payload["item"]
    if request.idempotency_key not in reservations:
        reservations[request.idempotency_key] = item
        await write(lambda: stock.update({item: stock[item] - 1}))
    return {"reserved": item}


@app.agent("stock.release", resource="orders-db")
async def release(request: AgentRequest) -> Any:
    # The undo of stock.reserve: its request, result, seq, idempotency_key and outcome.
    item = reservations.pop(request.payload["idempotency_key"], None)
    if item is not None:
        await write(lambda: stock.update({item: stock[item] + 1}))
    return {"released": item}


@app.agent("payments.charge")
async def charge(request: AgentRequest) -> Any:
    if request.payload["card"] == "declined":
        raise PermanentError("the card was declined")
    return {"charged": request.payload["amount"]}


@app.workflow("order")
async def order(ctx: WorkflowContext, data: Any) -> Any:
    number = await ctx.call("ledger.append", {"user": data["user"], "item": data["item"]})
    await ctx.call("stock.reserve", {"item": data["item"]}, undo="stock.release")
    await ctx.call("payments.charge", {"card": data["card"], "amount": data["amount"]})
    return {"user": data["user"], "number": number}


ORDERS = [
    ("alice", "book", "ok"),
    ("bob", "lamp", "ok"),
    ("alice", "lamp", "ok"),
    ("carol", "book", "declined"),
    ("bob", "book", "ok"),
    ("alice", "book", "ok"),
]


async def main() -> None:
    async with app, app.running():
        ids = await asyncio.gather(
            *(
                app.submit("order", {"user": user, "item": item, "card": card, "amount": 12})
                for user, item, card in ORDERS
            )
        )
        numbers: dict[str, list[int]] = {}
        for task_id, (user, item, _) in zip(ids, ORDERS):
            try:
                result = await app.result(task_id, timeout=30)
                numbers.setdefault(user, []).append(result["number"])
                print(f"{user}'s {item}: processed")
            except TaskFailedError as exc:
                print(f"{user}'s {item}: {exc.state}, {exc.error['reason']}")
    for user, taken in numbers.items():
        print(f"{user}'s ledger numbers: {sorted(taken)}")
    print(f"stock {stock}, at most {most_writers} database writes at once")


asyncio.run(main())
