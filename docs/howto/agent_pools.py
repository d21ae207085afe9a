from shepherd import App

app = App(alerts=())  # every process opens the same store: SHEPHERD_STORE, or shepherd.db here


@app.agent("payments.charge", within=10)
async def charge(request):
    return {"charged": request.payload["amount"]}  # the payment provider's API, in real life


@app.agent("payments.refund", within=10)
async def refund(request):
    return {"refunded": request.payload["amount"]}


@app.agent("email.send", within=30)
async def send(request):
    return {"sent": request.payload["template"]}  # the mail relay


@app.workflow("checkout")
async def checkout(ctx, order):
    paid = await ctx.call("payments.charge", order, undo="payments.refund")
    mailed = await ctx.call("email.send", {"template": "receipt", "order": order["id"]})
    return {"order": order["id"], **paid, **mailed}
