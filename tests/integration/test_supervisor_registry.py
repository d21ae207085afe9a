"""The supervisor reads the worker registry: an expired claim whose owner is dead says so."""

from __future__ import annotations

import pytest

from shepherd import App, WorkflowContext
from shepherd.core.records import JsonValue
from shepherd.testing import wait_until


def one_step(app: App) -> None:
    @app.workflow("slow", complete_within=0.3)
    async def slow(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return await ctx.call("nobody")

    @app.agent("nobody")
    async def nobody(request: object) -> JsonValue:
        return None


@pytest.mark.parametrize("owner_state", ["stopped", "alive"])
async def test_a_reset_names_an_owner_the_registry_deems_dead(app: App, owner_state: str) -> None:
    one_step(app)
    await app.open()
    store = app.store
    instance = "elsewhere:4242:beef"
    await store.register_worker(
        instance, host="elsewhere", pid=4242, roles=("scheduler",), agents=()
    )
    if owner_state == "stopped":
        await store.stop_worker(instance)
    task_id = await app.submit("slow", None)
    (claimed,) = await store.claim_tasks(locked_by=f"{instance}/s", limit=1)
    assert claimed.id == task_id

    async def reset_reason() -> str | None:
        for event in await app.history(task_id):
            if event.kind == "reset" and isinstance(event.detail, dict):
                return str(event.detail.get("reason"))
        return None

    async def was_reset() -> bool:
        return await reset_reason() is not None

    async with app.running(["supervisor"]):
        await wait_until(was_reset, timeout=20, message="the claim was never reset")
    reason = await reset_reason()
    assert reason is not None
    note = f"its owner {instance} is dead"
    if owner_state == "stopped":
        assert note in reason
    else:
        assert note not in reason
