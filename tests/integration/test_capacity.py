"""Capacity in one process over a real store: a handler holds a slot of its resource.

The agent's `resource=` (or, without one, the resource of the step's recorded
resolution) is held while the handler runs: a probe asking the store for a
slot meanwhile is refused. Waiting for a slot counts against the step's
complete_by: a step that never got one times out with a `CapacityFull` note,
and the supervisor's usual recovery applies. A `threads=True` handler keeps its
slot until its thread returns, past its deadline too. A resource that does not
exist fails the step permanently, naming it. A resource's rate is waited for
inside complete_by too (a `RateLimited` note). The tests that wait for a window
run on a FakeClock (`fake_time`) and move it.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import AgentRequest, App, TaskFailedError, WorkflowContext
from shepherd.core.events import EventKind
from shepherd.core.resources import Resource, Slot
from shepherd.core.states import ProcessState
from shepherd.testing import wait_until
from support.fake_time import WINDOW, pass_until, task_is

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 20.0
ONE = Resource(name="db", kind="sqlite", info={}, capacity=1)
PROBE = Slot("db", "probe")


async def probe(app: App) -> bool:
    """Whether a slot of `db` is free now (the probe's slot is given back at once)."""
    granted, _ = await app.store.acquire_slots("db", [PROBE.holder], worker="probe", lease=60.0)
    if granted:
        await app.store.release_slots([PROBE])
    return bool(granted)


async def timed_out(app: App, task_id: str, cause: str) -> None:
    """Move the app's clock until the task's history notes a step timed out for `cause`."""

    async def noted() -> bool:
        return any(
            e.kind == EventKind.STEP_TIMED_OUT
            and isinstance(e.detail, dict)
            and (e.detail.get("error") or {}).get("type") == cause
            for e in await app.store.task_events(task_id)
        )

    await pass_until(app, noted, message=f"no {cause} time-out")


def processed(app: App, task_id: str) -> Any:
    """A predicate: the task is processed."""
    return task_is(app, task_id, lambda t: t.process_state is ProcessState.PROCESSED)


async def test_a_handler_holds_its_agents_resource_while_it_runs(app: App) -> None:
    await app.open()
    await app.store.add_resource(ONE)
    free_while_running: list[bool] = []

    @app.agent("write", resource="db")
    async def write(request: AgentRequest) -> JsonValue:
        free_while_running.append(await probe(app))
        return request.payload

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data)

    async with app.running():
        ids = [await app.submit("save", {"n": n}) for n in range(3)]
        assert [await app.result(t, timeout=PATIENCE) for t in ids] == [{"n": n} for n in range(3)]

    assert free_while_running == [False] * 3
    assert await probe(app)  # each reply gave its slot back


async def test_without_resource_the_steps_resolution_names_it(app: App) -> None:
    await app.open()
    await app.store.add_resource(ONE)
    await app.store.move_partition("p1", "db")
    await app.store.assign_entity("user-1", "p1")
    free_while_running: list[bool] = []

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        free_while_running.append(await probe(app))
        return None

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("write", data, entity="user-1")
        await ctx.call("write", data)  # no entity: no resource, no slot
        return None

    async with app.running():
        await app.result(await app.submit("save", {}), timeout=PATIENCE)

    assert free_while_running == [False, True]


@pytest.mark.fake_time
async def test_waiting_for_a_slot_counts_against_complete_by(app: App) -> None:
    await app.open()
    await app.store.add_resource(ONE)
    holding = asyncio.Event()
    go = asyncio.Event()

    @app.agent("write", resource="db")
    async def write(request: AgentRequest) -> JsonValue:
        if request.payload == "first":
            holding.set()
            await go.wait()
        return request.payload

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data, within=10 * WINDOW if data == "first" else WINDOW)

    async with app.running():
        first = await app.submit("save", "first")
        await asyncio.wait_for(holding.wait(), PATIENCE)
        second = await app.submit("save", "second")

        await timed_out(app, second, "CapacityFull")
        go.set()
        assert await app.result(first, timeout=PATIENCE) == "first"
        await pass_until(app, processed(app, second))  # reset, then sent again
        assert await app.result(second, timeout=PATIENCE) == "second"


@pytest.mark.fake_time
async def test_a_threaded_handler_keeps_its_slot_until_its_thread_returns(app: App) -> None:
    await app.open()
    await app.store.add_resource(ONE)
    started = threading.Event()
    release = threading.Event()

    @app.agent("slow", resource="db", threads=True)
    def slow(request: AgentRequest) -> JsonValue:
        if request.attempt == 1:
            started.set()
            release.wait(PATIENCE)
        return request.attempt

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("slow", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("save", {})
        await asyncio.to_thread(started.wait, PATIENCE)

        async def first_gave_up() -> bool:
            events = await app.store.task_events(task_id)
            return any(e.kind == EventKind.STEP_TIMED_OUT for e in events)

        await pass_until(app, first_gave_up, message="the first try never timed out")
        # Past its deadline the thread still runs, and still holds the only slot.
        assert not await probe(app)
        release.set()
        await wait_until(lambda: probe(app), timeout=PATIENCE, message="the slot stayed held")
        await pass_until(app, processed(app, task_id))  # reset, then sent again
        assert await app.result(task_id, timeout=PATIENCE) >= 2


async def test_an_unknown_resource_fails_the_step_naming_it(app: App) -> None:
    await app.open()

    @app.agent("write", resource="nowhere")
    async def write(request: AgentRequest) -> JsonValue:
        raise AssertionError("never called")

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data)

    async with app.running():
        task_id = await app.submit("save", {})
        with pytest.raises(TaskFailedError, match="nowhere"):
            await app.result(task_id, timeout=PATIENCE)


@pytest.mark.fake_time
async def test_waiting_for_the_rate_counts_against_complete_by(app: App) -> None:
    await app.open()
    # One call every 3 windows, at most one saved up: the second call waits 3 windows.
    await app.store.add_resource(Resource(name="api", kind="http", info={}, rate=1 / (3 * WINDOW)))
    calls: list[JsonValue] = []

    @app.agent("call", resource="api")
    async def call(request: AgentRequest) -> JsonValue:
        calls.append(request.payload)
        return request.payload

    @app.workflow("use")
    async def use(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("call", data, within=WINDOW)

    async with app.running():
        first = await app.submit("use", "first")
        assert await app.result(first, timeout=PATIENCE) == "first"
        second = await app.submit("use", "second")

        await timed_out(app, second, "RateLimited")
    assert calls[0] == "first"
