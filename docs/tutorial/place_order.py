import asyncio

from shepherd import TaskFailedError

from shop import app

ENDED = {"processed", "compensated", "cancelled", "error"}


async def place_order(order):
    task_id = await app.submit("orders.process", order, key=order["id"], reply_to="shop-ui")
    try:
        return await app.result(task_id, timeout=30)
    except TaskFailedError as exc:
        # exc.state is "compensated", "cancelled" or "error"; exc.error["reason"] says why
        return f"not placed, {exc.state}: {exc.error['reason']}"


async def main():
    orders = [
        {"id": "A-2001", "sku": "tea", "card": "ok", "amount": 700},
        {"id": "A-2002", "sku": "sold-out", "card": "ok", "amount": 300},
    ]
    for order in orders:
        print(order["id"], await place_order(order))

    # What the "shop-ui" queue heard, from its first event, until both orders ended.
    waiting = {order["id"] for order in orders}
    async for event in app.events("shop-ui"):
        print(event.key, event.kind)
        if event.kind in ENDED:
            waiting.discard(event.key)
        if not waiting:
            break
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
