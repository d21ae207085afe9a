"""An app whose workflows call agents it does not register refuses to start a scheduler.

A check of the registrations, which no store changes: on SQLite only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from shepherd import AgentRequest, App, ConfigError, ProcessState, WorkflowContext
from support.backends import sqlite_only

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = sqlite_only()

MESSAGE = (
    "workflow 'orders.process' calls agents that are not registered: 'inventory.reserve' "
    r"\(.*test_incomplete_app.py:\d+\), 'shipping.create' \(agents=\); register each with @app.agent"
)


def incomplete(app: App) -> None:
    """The README's mistake: a workflow calling agents nobody registered."""

    @app.agent("payments.charge")
    async def charge(request: AgentRequest) -> JsonValue:
        return {"charged": request.payload}

    @app.workflow("orders.process", agents=["shipping.create"])
    async def process(ctx: WorkflowContext, order: Any) -> JsonValue:
        await ctx.call("inventory.reserve", order)
        return await ctx.call("payments.charge", order)


async def test_running_a_scheduler_raises_before_any_role_starts(app: App) -> None:
    incomplete(app)
    task_id = await app.submit("orders.process", {"id": 1})

    with pytest.raises(ConfigError, match=MESSAGE):
        async with app.running():
            pytest.fail("the roles started")
    with pytest.raises(ConfigError, match=MESSAGE):
        await app.run(["scheduler"])
    with pytest.raises(ConfigError, match=MESSAGE):
        async with app.running(["agent", "scheduler"]):
            pytest.fail("the roles started")

    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PENDING
    assert task.lock_epoch == 0


async def test_agent_and_supervisor_processes_do_not_check(app: App) -> None:
    incomplete(app)
    task_id = await app.submit("orders.process", {"id": 1})

    async with app.running(["agent", "supervisor"]):
        pass

    assert (await app.get_task(task_id)).process_state is ProcessState.PENDING


async def test_once_the_agents_are_registered_the_task_runs(app: App) -> None:
    incomplete(app)
    for name in ("inventory.reserve", "shipping.create"):

        @app.agent(name)
        async def handler(request: AgentRequest) -> JsonValue:
            return request.agent

    async with app.running():
        task_id = await app.submit("orders.process", {"id": 1})
        assert await app.result(task_id, timeout=15.0) == {"charged": {"id": 1}}
