"""Durable sleep: a workflow waits, holding no claim and no worker slot."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

app = App("sqlite:///sleep.db")


@app.agent("emails.send")
async def send(request: AgentRequest) -> Any:
    return f"{request.payload['text']} -> {request.payload['to']}"


@app.workflow("trial.remind")
async def remind(ctx: WorkflowContext, data: Any) -> Any:
    welcome = await ctx.call("emails.send", {"to": data["to"], "text": "welcome"})
    await ctx.sleep(data["wait"])  # the task gives up its claim until then
    ending = await ctx.call("emails.send", {"to": data["to"], "text": "trial ends soon"})
    return [welcome, ending]


@app.workflow("report.daily")
async def daily(ctx: WorkflowContext, data: Any) -> Any:
    await ctx.sleep_until(datetime.fromisoformat(data["at"]))
    return "report sent"


async def asleep(task_id: str) -> bool:
    task = await app.get_task(task_id)
    return task.process_state == "pending" and any(s.kind == "sleep" for s in task.steps)


async def main() -> None:
    async with app, app.running():
        ann = await app.submit("trial.remind", {"to": "ann", "wait": 1.0})
        bob = await app.submit("trial.remind", {"to": "bob", "wait": 7 * 86400})
        at = datetime.now(UTC) + timedelta(seconds=0.5)
        report = await app.submit("report.daily", {"at": at.isoformat()})
        print(await app.result(ann, timeout=10))
        print(await app.result(report, timeout=10))

        while not await asleep(bob):
            await asyncio.sleep(0.05)
        task = await app.get_task(bob)
        days = round((task.not_before - task.updated_at) / timedelta(days=1))
        print(f"bob: {task.process_state}, locked by {task.locked_by}, due in {days} days")
        await app.operations.wake(bob, by="ops")  # or: shepherd wake TASK
        print(await app.result(bob, timeout=10))


if __name__ == "__main__":
    asyncio.run(main())
