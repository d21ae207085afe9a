"""Parallel calls (`asyncio.gather`) all settle before the task ends, on both backends.

`gather` raises the first failure at once while the other calls still run. The
scheduler must not plan the compensation (nor end the task) before those have
an outcome: a step that completes after its sibling failed is undone too.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from shepherd import (
    AgentRequest,
    App,
    PermanentError,
    ProcessState,
    StepState,
    TaskFailedError,
    WorkflowContext,
)
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def ended(app: App, task_id: str) -> Task:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


async def step_failed(app: App, task_id: str, seq: int) -> bool:
    task = await app.get_task(task_id)
    return any(s.seq == seq and s.state is StepState.FAILED for s in task.steps)


async def test_a_call_that_completes_after_its_sibling_failed_is_undone(app: App) -> None:
    undone: list[str] = []
    task_ids: list[str] = []

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        raise PermanentError("card declined")

    @app.agent("reserve", within=10)
    async def reserve(request: AgentRequest) -> JsonValue:
        # Completes only once the failure of its sibling (step 2) is recorded.
        await wait_until(lambda: step_failed(app, task_ids[0], 2), timeout=PATIENCE)
        return {"reservation": "R-1"}

    @app.agent("release")
    async def release(request: AgentRequest) -> JsonValue:
        undone.append(request.payload["result"]["reservation"])
        return None

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        await asyncio.gather(
            ctx.call("reserve", data, undo="release"),  # step 1
            ctx.call("charge", data),  # step 2
        )
        return "unreachable"

    async with app.running():
        task_ids.append(await app.submit("order", {"id": 1}))
        task = await ended(app, task_ids[0])

    assert task.process_state is ProcessState.COMPENSATED, task.error
    assert undone == ["R-1"]
    states = {s.seq: s.state for s in task.steps}
    assert states[1] is StepState.COMPENSATED
    assert states[2] is StepState.FAILED


async def test_a_workflow_that_returns_waits_for_calls_it_left_running(app: App) -> None:
    finished: list[str] = []
    task_ids: list[str] = []

    @app.agent("fast")
    async def fast(request: AgentRequest) -> JsonValue:
        return "fast"

    @app.agent("slow", within=10)
    async def slow(request: AgentRequest) -> JsonValue:
        # Completes only once its sibling has completed and the body returned.
        await wait_until(lambda: _completed(app, task_ids[0], "fast"), timeout=PATIENCE)
        finished.append("slow")
        return "slow"

    @app.workflow("fire_and_forget")
    async def fire(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        # The slow call is started and never awaited by the body itself.
        pending = asyncio.ensure_future(ctx.call("slow", data))
        result = await ctx.call("fast", data)
        del pending
        return result

    async with app.running():
        task_ids.append(await app.submit("fire_and_forget", None))
        task = await ended(app, task_ids[0])

    assert task.process_state is ProcessState.PROCESSED, task.error
    assert finished == ["slow"]
    assert {s.agent: s.state for s in task.steps} == {
        "fast": StepState.COMPLETED,
        "slow": StepState.COMPLETED,
    }


async def _completed(app: App, task_id: str, agent: str) -> bool:
    task = await app.get_task(task_id)
    return any(s.agent == agent and s.state is StepState.COMPLETED for s in task.steps)
