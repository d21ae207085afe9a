"""A reply handed to its step before its commit, in the scheduler of the worker's process.

The workflow goes on with the reply at once and its next write records it
(`reply_then`). A slow workflow body never holds the reply back: it is
committed alone meanwhile. A reply that does not count when that write is made
(its request was superseded) starts nothing: the workflow that went on with it
stops, and the task goes on from what the store recorded.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, WorkflowContext
from shepherd.core.states import StepState
from shepherd.testing import wait_until
from support.factories import step_start

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

#: Real seconds a test waits for what it expects before it fails (a backstop).
PATIENCE = 15.0


async def test_a_slow_workflow_body_does_not_hold_its_reply_back(app: App) -> None:
    go_on = asyncio.Event()

    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("slow")
    async def slow(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("noop", 1)
        await go_on.wait()  # the body has other things to do before its next step
        return [first, await ctx.call("noop", 2)]

    async with app.running(["scheduler", "agent"]):
        task_id = await app.submit("slow", None)

        async def first_recorded() -> bool:
            task = await app.get_task(task_id)
            return [s.state for s in task.steps] == [StepState.COMPLETED]

        # Recorded while the body still waits: committed alone, not held for step 2.
        await wait_until(first_recorded, timeout=PATIENCE)
        go_on.set()
        assert await app.result(task_id, timeout=PATIENCE) == [1, 2]
    task = await app.get_task(task_id)
    assert [(s.seq, s.state, s.attempt) for s in task.steps] == [
        (1, StepState.COMPLETED, 1),
        (2, StepState.COMPLETED, 1),
    ]


async def test_a_reply_that_no_longer_counts_starts_nothing(app: App) -> None:
    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        if request.seq == 1 and request.attempt == 1:
            # While this attempt runs, its step is started again (attempt 2): this
            # attempt's request is superseded, and its reply can no longer count.
            task = await app.store.get_task(request.task_id)
            assert task is not None
            await app.store.start_step(step_start(task, seq=1, agent="noop", attempt=2, payload=1))
        return request.payload

    @app.workflow("two")
    async def two(ctx: WorkflowContext, data: Any) -> JsonValue:
        return [await ctx.call("noop", 1), await ctx.call("noop", 2)]

    async with app.running(["scheduler", "agent"]):
        task_id = await app.submit("two", None)
        # Attempt 2's reply resumes the task from the store (`Scheduler.deliver`).
        assert await app.result(task_id, timeout=PATIENCE) == [1, 2]
    task = await app.get_task(task_id)
    # The workflow that went on with attempt 1's reply did not start step 2:
    # step 2 ran once, after attempt 2 of step 1 was recorded.
    assert [(s.seq, s.state, s.attempt) for s in task.steps] == [
        (1, StepState.COMPLETED, 2),
        (2, StepState.COMPLETED, 1),
    ]
    assert task.failure_count == 0
