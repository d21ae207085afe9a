"""Tasks peeked at and claimed by their first writes (`core.claiming`).

Two schedulers, each with little to do, peek at the same tasks: each task runs
once. Both processes' schedulers (here two Apps on one store) see every lone
task (`peek_tasks`) and replay it; only one first write can claim it. The
other's run stops having written nothing. Every task ends `processed` with
`failure_count` 0, every step completed once, and each run claimed once.

A task peeked at stays pending until its first write commits, so later peeks
find it again: they must look past it, to the tasks not yet running.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App
from shepherd.core.states import ProcessState
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd import AgentRequest, WorkflowContext
    from shepherd.core.records import JsonValue

PATIENCE = 30.0
TASKS = 30


def _app(store_url: str) -> App:
    app = App(store_url, poll_interval=0.05, idle_poll_max=0.2, sqlite_synchronous="NORMAL")

    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("two")
    async def two(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("noop", 1)
        await ctx.sleep(0.0 if data % 3 else 0.01)  # some wake, and are peeked again
        return [first, await ctx.call("noop", 2)]

    return app


async def test_tasks_peeked_by_two_schedulers_run_once(store_url: str) -> None:
    one, other = _app(store_url), _app(store_url)
    try:
        async with one.running(["scheduler", "agent"]), other.running(["scheduler", "agent"]):
            ids = []
            for n in range(TASKS):  # one at a time: each scheduler has little to do
                ids.append(await one.submit("two", n))
                await asyncio.sleep(0)
            results = [await one.result(task_id, timeout=PATIENCE) for task_id in ids]
        assert results == [[1, 2]] * TASKS
        for task_id in ids:
            task = await one.get_task(task_id)
            assert task.process_state is ProcessState.PROCESSED
            assert task.failure_count == 0
            history = await one.history(task_id)
            kinds = Counter(e.kind for e in history)
            completed = [e.detail["seq"] for e in history if e.kind == "step_completed"]
            assert completed == [1, 3], f"{task_id}: {completed}"
            # Claimed once per run: the first, and once more after a sleep.
            assert kinds["claimed"] == 1 + kinds["sleeping"], f"{task_id}: {kinds}"
    finally:
        await one.close()
        await other.close()


@pytest.mark.fake_time
async def test_a_peek_looks_past_the_tasks_whose_first_writes_have_not_committed(
    app: App,
) -> None:
    # No time passes here (the fake clock stands still): the third task runs only if the
    # peek that finds it drives it, not a poll later.
    gate = asyncio.Event()
    entered: list[int] = []

    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("held")
    async def held(ctx: WorkflowContext, data: Any) -> JsonValue:
        entered.append(data)
        if data < 2:
            await gate.wait()  # before its first write: the task stays pending
        return await ctx.call("noop", data)

    async with app.running():
        ids = []
        for n in range(3):
            ids.append(await app.submit("held", n))
            await wait_until(
                lambda: len(entered) == len(ids), timeout=PATIENCE, message=f"task {n} not run"
            )
        gate.set()
        assert [await app.result(task_id, timeout=PATIENCE) for task_id in ids] == [0, 1, 2]


@pytest.mark.fake_time
async def test_a_peek_that_found_every_task_due_waits_for_the_next_submit(app: App) -> None:
    # A lone task is found by one peek; the next look waits for the next submit's
    # wake-up (the fake clock stands still: no poll comes), not a second peek at once.
    peeks = 0
    peek_tasks = app.store.peek_tasks

    async def counted(**kwargs: Any) -> Any:
        nonlocal peeks
        peeks += 1
        return await peek_tasks(**kwargs)

    app.store.peek_tasks = counted

    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("lone")
    async def lone(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("noop", data)

    async with app.running():
        await wait_until(lambda: peeks >= 1, timeout=PATIENCE, message="no first look")
        looks = []
        for n in range(5):
            before = peeks
            assert await app.result(await app.submit("lone", n), timeout=PATIENCE) == n
            looks.append(peeks - before)
    # One look per task; its end may ring once more (an empty look), never a look per poll.
    assert all(1 <= n <= 2 for n in looks), looks
    assert sum(looks) < 2 * len(looks), looks
