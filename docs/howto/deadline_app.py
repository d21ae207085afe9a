"""Task deadlines: a task not ended in time is cancelled, and its completed steps undone."""

import asyncio
from typing import Any

from shepherd import AgentRequest, App, TaskFailedError, WorkflowContext

app = App("sqlite:///deadlines.db", supervisor_interval=0.25)


@app.agent("rooms.hold")
async def hold(request: AgentRequest) -> Any:
    return {"room": 12}


@app.agent("rooms.release")
async def release(request: AgentRequest) -> Any:
    print("undo: rooms.release ran")
    return None


@app.agent("payments.await")
async def await_payment(request: AgentRequest) -> Any:
    await asyncio.Event().wait()  # the customer never pays


@app.workflow("bookings.reserve", deadline=0.5)
async def reserve(ctx: WorkflowContext, data: Any) -> Any:
    room = await ctx.call("rooms.hold", data, undo="rooms.release")
    return await ctx.call("payments.await", room, within=60)


async def main() -> None:
    async with app, app.running():
        task_id = await app.submit("bookings.reserve", {"guest": "ann"})
        try:
            await app.result(task_id, timeout=10)
        except TaskFailedError as exc:
            print(f"{exc.state}: {exc.error['reason']}")
        task = await app.get_task(task_id)
        print(
            f"its deadline was {(task.deadline - task.created_at).total_seconds()} s after its submit"
        )


if __name__ == "__main__":
    asyncio.run(main())
