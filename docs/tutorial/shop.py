import asyncio
import os

from shepherd import App, PermanentError, RetryPolicy, TransientError

app = App("sqlite:///shop.db")

# A stand-in for a payment API. A real one takes the idempotency key (often as
# an `Idempotency-Key` header) and answers a repeated key with the first answer.
CHARGES: dict[str, dict] = {}


@app.agent("inventory.reserve", within=5)
async def reserve(request):
    order = request.payload
    if order["sku"] == "sold-out":
        raise PermanentError(f"{order['sku']} is out of stock")
    return {"reservation": f"res-{order['id']}"}


@app.agent("inventory.release")
async def release(request):
    # An undo receives {"request", "result", "seq", "idempotency_key", "outcome"}
    # of the step it undoes.
    return {"released": request.payload["result"]["reservation"]}


@app.agent("payments.charge", retry=RetryPolicy(max_attempts=5, initial_delay=0.1))
async def charge(request):
    order = request.payload
    if request.retry == 0:
        raise TransientError("payment gateway timed out")  # the first try: retried
    if order["card"] == "declined":
        raise PermanentError("card declined")  # not retried: the task is undone
    return CHARGES.setdefault(
        request.idempotency_key,
        {"charge_id": f"ch-{len(CHARGES) + 1}", "amount": order["amount"]},
    )


@app.agent("payments.refund")
async def refund(request):
    return {"refunded": request.payload["result"]["charge_id"]}


@app.agent("shipping.create", within=3)
async def ship(request):
    if os.environ.get("SHIPPING_DOWN"):
        await asyncio.sleep(3600)  # a service that never answers
    return {"tracking": f"TRK-{request.payload['order']['id']}"}


@app.workflow("orders.process", max_failures=3)
async def process(ctx, order):
    await ctx.call("inventory.reserve", order, undo="inventory.release")
    paid = await ctx.call("payments.charge", order, undo="payments.refund", within=10)
    return await ctx.call("shipping.create", {"order": order, "charge": paid})
