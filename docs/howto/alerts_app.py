"""An order whose workflow has a bug: it goes to `error`, and an operator is alerted."""

from typing import Any

from shepherd import App, WorkflowContext

app = App()  # alert sinks: the log (the default); the store keeps every alert too


@app.workflow("orders.pay")
async def pay(ctx: WorkflowContext, data: Any) -> Any:
    return data["card"]  # a bug: an order without a card raises KeyError
