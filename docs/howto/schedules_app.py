"""Schedules: a workflow started once per tick, cluster-wide, by the leading supervisor."""

import asyncio
from typing import Any

from shepherd import App, ConfigError, WorkflowContext

app = App("sqlite:///schedules.db")


@app.workflow("reports.make")
async def make(ctx: WorkflowContext, data: Any) -> Any:
    return f"{data['kind']} report"


app.schedule("heartbeat", workflow="reports.make", every=1, data={"kind": "tiny"})
app.schedule(
    "nightly",
    workflow="reports.make",
    cron="30 2 * * *",
    timezone="Europe/Berlin",
    data={"kind": "nightly"},
    catch_up="latest",
)


async def fired(name: str) -> list[str]:
    """The keys of the tasks `name` has fired, oldest first."""
    tasks = await app.list_tasks(workflow="reports.make", limit=1000)
    prefix = f"schedule:{name}@"
    return sorted(t.key for t in tasks if t.key and t.key.startswith(prefix))


async def main() -> None:
    try:
        app.schedule("broken", workflow="reports.make", cron="30 25 * * *")
    except ConfigError as exc:
        print(exc.message)
    async with app, app.running():
        while not await fired("heartbeat"):  # its first tick: within a second or two
            await asyncio.sleep(0.1)
        first = (await app.list_tasks(key=(await fired("heartbeat"))[0]))[0]
        print("heartbeat:", await app.result(first.id, timeout=10))

        task_id = await app.operations.schedules.trigger("nightly")  # once, now
        print("nightly, triggered:", await app.result(task_id, timeout=10))
        for view in await app.operations.schedules.list():
            print(f"{view.schedule.name}: {view.schedule.rule}, catch up {view.schedule.catch_up}")


if __name__ == "__main__":
    asyncio.run(main())
