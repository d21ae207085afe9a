"""Run an order's step in this process, then read one scrape as Prometheus would."""

import asyncio
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from shepherd import AgentRequest, App, WorkflowContext
from shepherd.exposition import metrics_text

app = App(alerts=())  # the store: SHEPHERD_STORE, or shepherd.db here

SHOWN = {
    "shepherd_tasks_ended_total",
    "shepherd_agent_calls_total",
    "shepherd_step_duration_seconds_count",
}


@app.agent("prices.quote")
async def quote(request: AgentRequest) -> Any:
    return {"sku": request.payload["sku"], "price": 12}


@app.workflow("orders.quote")
async def order(ctx: WorkflowContext, data: Any) -> Any:
    return await ctx.call("prices.quote", data)


async def main() -> None:
    async with app, app.running():
        task_id = await app.submit("orders.quote", {"sku": "A-1"})
        await app.result(task_id, timeout=30)
        text = (await metrics_text(app)).decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in SHOWN and sample.value:
                print(sample.name, sample.labels, sample.value)


asyncio.run(main())
