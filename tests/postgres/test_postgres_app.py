"""An App on PostgreSQL, every role in-process: tasks go through a 3-step workflow."""

from __future__ import annotations

import asyncio
import time

import pytest

from shepherd import App
from shepherd.agents import AgentRequest
from shepherd.core.records import JsonValue
from shepherd.core.states import ProcessState
from shepherd.scheduler import WorkflowContext

pytestmark = pytest.mark.postgres

TASKS = 200


def order_app(url: str) -> App:
    app = App(url, alerts=())

    @app.agent("stock.reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        return {"reserved": request.payload["items"]}

    @app.agent("payments.charge")
    async def charge(request: AgentRequest) -> JsonValue:
        return {"charged": request.payload["amount"], "key": request.idempotency_key}

    @app.agent("mail.send")
    async def send(request: AgentRequest) -> JsonValue:
        return {"sent": True}

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        stock = await ctx.call("stock.reserve", {"items": data["items"]})
        paid = await ctx.call("payments.charge", {"amount": data["amount"]})
        await ctx.call("mail.send", {"to": data["email"]})
        return {"stock": stock, "paid": paid["charged"]}

    return app


async def test_two_hundred_orders_are_processed(postgres_url: str) -> None:
    app = order_app(postgres_url)
    async with app, app.running():
        started = time.perf_counter()
        ids = await asyncio.gather(
            *(
                app.submit("order", {"items": [i], "amount": i, "email": f"{i}@x"}, key=f"o{i}")
                for i in range(TASKS)
            )
        )
        results = await asyncio.wait_for(
            asyncio.gather(*(app.result(task_id) for task_id in ids)), 60
        )
        elapsed = time.perf_counter() - started
        assert results == [{"stock": {"reserved": [i]}, "paid": i} for i in range(TASKS)]
        assert await app.store.count_tasks() == {ProcessState.PROCESSED: TASKS}
        stats = app.store.statistics()
        print(
            f"\n{TASKS} tasks in {elapsed:.2f}s = {TASKS / elapsed:.0f} tasks/s; "
            f"{stats['commits']:.0f} commits, {stats['ops_per_batch']:.1f} ops/batch"
        )
        history = [e.kind for e in await app.history(ids[0])]
        assert history[0] == "received"
        assert history[-1] == "processed"
        assert history.count("step_completed") == 3
