"""A store the dashboard has something to show of: tasks in several states, alerts open and not.

`seed(app)` runs an App on fake time (its test is marked `fake_time`) with
one workflow, `orders.check`, whose agent answers `{"ok": true}` at once and
never answers `{"ok": false}`, so that such a task's step passes its window
and the task ends in `error` with an alert. It leaves the App stopped, with
tasks `processed`, in `error` (one alert acknowledged, the others open),
`pending` (more than a page of the task list: `PENDING`) and one being
cancelled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from shepherd import ProcessState
from shepherd.testing import wait_until
from support import fake_time
from support.fake_time import WINDOW

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue, Task

__all__ = ["PENDING", "Seeded", "seed"]

#: Pending tasks: more than a page of the task list (50), so that it has a next page.
PENDING = 60
#: Real seconds a step of the seeding waits at most (a backstop).
PATIENCE = 15.0


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Seeded:
    """The tasks and alerts `seed` made."""

    tasks: tuple[Task, ...]
    alert_ids: tuple[int, ...]

    def ids(self, state: ProcessState) -> list[str]:
        """The ids of the tasks that were in `state` once seeded."""
        return [t.id for t in self.tasks if t.process_state is state]


async def seed(app: App) -> Seeded:
    """Fill `app`'s store (see the module's docstring); the tasks as they are at the end."""
    taken: list[JsonValue] = []

    @app.agent("check")
    async def check(request: AgentRequest) -> JsonValue:
        taken.append(request.payload)
        if isinstance(request.payload, dict) and request.payload.get("ok") is False:
            await asyncio.Event().wait()  # a remote service that never answers
        return request.payload

    @app.workflow("orders.check", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("check", data, within=WINDOW)

    ids = []
    async with app.running():
        for n in range(3):
            payload: JsonValue = {"ok": False, "n": n}
            task_id = await app.submit("orders.check", payload, key=f"bad-{n}")

            def sent(payload: JsonValue = payload) -> bool:
                return payload in taken

            await wait_until(sent, timeout=PATIENCE)
            task = await fake_time.ended(app, task_id)
            assert task.process_state is ProcessState.ERROR
            ids.append(task_id)
        for n in range(2):
            task_id = await app.submit("orders.check", {"ok": True, "n": n}, key=f"good-{n}")
            assert (await fake_time.ended(app, task_id)).process_state is ProcessState.PROCESSED
            ids.append(task_id)
    alerts = await app.alerts()
    await app.operations.acknowledge_alert(alerts[-1].id, by="seed")
    ids += [
        await app.submit("orders.check", {"ok": True, "n": n}, key=f"later-{n}")
        for n in range(PENDING)
    ]
    await app.cancel(ids[-1], by="seed")
    tasks = tuple([await app.get_task(task_id) for task_id in ids])
    return Seeded(tasks=tasks, alert_ids=tuple(a.id for a in alerts))
