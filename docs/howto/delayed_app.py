"""Delayed tasks: stored at once, started no earlier than their time."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from shepherd import App, ConfigError, Submission, WorkflowContext

app = App("sqlite:///delayed.db")


@app.workflow("reminders.send")
async def send(ctx: WorkflowContext, data: Any) -> Any:
    return f"reminded {data['to']}"


async def main() -> None:
    async with app:
        soon = await app.submit("reminders.send", {"to": "ann"}, delay=1.0)
        task = await app.get_task(soon)
        wait = task.not_before - task.created_at
        print(f"{task.process_state}, due {wait.total_seconds()} s after its submit")

        at = datetime.now(UTC) + timedelta(seconds=0.5)
        batch = await app.submit_many(
            [
                Submission("reminders.send", {"to": "bob"}, not_before=at),
                Submission("reminders.send", {"to": "cyd"}, delay=0.5, key="cyd-1"),
            ]
        )
        try:
            await app.submit("reminders.send", {"to": "dee"}, delay=-1)
        except ConfigError as exc:
            print(exc.message)

        async with app.running():
            for task_id in [*batch, soon]:
                print(await app.result(task_id, timeout=10))


if __name__ == "__main__":
    asyncio.run(main())
