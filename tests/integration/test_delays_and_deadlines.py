"""Delayed tasks and task deadlines on a FakeClock, with the roles that run them.

A `delay=60` task is not claimed at 59 s and is at 60 s. A `deadline=10` task
whose agent hangs is cancelled by the supervisor alone (no scheduler, no
agent running) by 10 s plus one scan interval, with the reason `deadline
passed`, and ends `cancelled`, its completed step undone, once a worker
starts. Each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import AgentRequest, App, ProcessState, WorkflowContext
from shepherd.core.timing import DEADLINE_PASSED
from support.fake_time import PATIENCE, PERIODS, clock_of, ended, pass_until, task_is

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time


async def test_a_delayed_task_is_claimed_at_its_time_not_before(app: App) -> None:
    clock = clock_of(app)
    ran: list[float] = []

    @app.workflow("later")
    async def later(ctx: WorkflowContext, data: Any) -> JsonValue:
        ran.append(clock.monotonic())
        return "done"

    start = clock.monotonic()
    async with app.running(["scheduler", "supervisor"]):
        task_id = await app.submit("later", {}, delay=60)
        # Moved one wake-up at a time up to 59 s: the task is never claimed.
        await pass_until(app, lambda: clock.monotonic() - start >= 59)
        task = await app.get_task(task_id)
        assert task.process_state is ProcessState.PENDING
        assert task.lock_epoch == 0
        assert ran == []
        await pass_until(
            app, task_is(app, task_id, lambda t: t.process_state is ProcessState.PROCESSED)
        )
    assert ran == [start + 60]
    assert (await app.get_task(task_id)).result == "done"


async def test_a_hanging_task_is_cancelled_at_its_deadline_with_no_worker_running(
    app: App,
) -> None:
    clock = clock_of(app)
    entered = asyncio.Event()
    undone: list[JsonValue] = []

    @app.agent("book")
    async def book(request: AgentRequest) -> JsonValue:
        return {"booking": 1}

    @app.agent("unbook")
    async def unbook(request: AgentRequest) -> JsonValue:
        undone.append(request.payload)
        return None

    @app.agent("hang")
    async def hang(request: AgentRequest) -> JsonValue:
        entered.set()
        await asyncio.Event().wait()
        return None  # pragma: no cover

    @app.workflow("trip")
    async def trip(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("book", data, undo="unbook")
        return await ctx.call("hang", data, within=600)

    async with app.running():
        task_id = await app.submit("trip", {"to": "Oslo"}, deadline=10)
        submitted = clock.now()
        await asyncio.wait_for(entered.wait(), PATIENCE)  # the clock stands still meanwhile
    # Every worker is stopped: only the supervisor runs.
    async with app.running(["supervisor"]):
        await pass_until(
            app, task_is(app, task_id, lambda t: t.process_state is ProcessState.COMPENSATING)
        )
    cancelled = await app.get_task(task_id)
    assert cancelled.error["reason"] == DEADLINE_PASSED
    assert cancelled.cancel_requested
    assert cancelled.deadline == submitted + timedelta(seconds=10)
    interval = timedelta(seconds=PERIODS["supervisor_interval"])
    assert cancelled.updated_at <= cancelled.deadline + interval
    assert undone == []

    async with app.running():
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.CANCELLED
    assert task.error["reason"] == DEADLINE_PASSED
    assert len(undone) == 1
