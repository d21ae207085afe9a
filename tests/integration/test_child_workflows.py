"""Child workflows (`ctx.run_workflow`, `ctx.start_workflow`) on a FakeClock, with the roles.

A parent awaiting children holds no claim; children run in parallel
(`asyncio.gather`) and one that fails fails its parent's step with its
reason; cancelling a parent cancels its children, whose steps are undone
newest first; a started child goes on or is cancelled when its parent ends
first, as its call chose. Each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd import AgentRequest, App, PermanentError, ProcessState, WorkflowContext
from shepherd.core.states import StepKind, StepState
from shepherd.dashboard import create_dashboard
from shepherd.errors import ConfigError, PayloadError, UnknownWorkflowError
from shepherd.lineage import links_of
from support.backends import sqlite_only
from support.fake_time import clock_of, ended, pass_until, task_is

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.core.records import JsonValue, Task

pytestmark = pytest.mark.fake_time

HOUR = 3600.0
TOKEN = "the-shared-dashboard-token"


def _steps_of(app: App, task_id: str, count: int) -> Callable[[], Awaitable[bool]]:
    """A predicate: the task exists and has `count` steps recorded."""

    async def predicate() -> bool:
        task = await app.operations.find_task(task_id)
        return task is not None and len(task.steps) == count

    return predicate


def _waiting(task: Task) -> bool:
    return task.process_state is ProcessState.PENDING and task.locked_by is None


async def test_a_parent_gathers_three_children_and_one_failing_fails_its_step(app: App) -> None:
    undone: list[str] = []

    @app.agent("pack")
    async def pack(request: AgentRequest) -> JsonValue:
        if request.payload == "broken":
            raise PermanentError("no such item: broken")
        return f"packed {request.payload}"

    @app.agent("reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        return "reserved"

    @app.agent("release")
    async def release(request: AgentRequest) -> JsonValue:
        undone.append("release")
        return None

    @app.workflow("item")
    async def item(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("pack", data)

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", None, undo="release")
        results = await asyncio.gather(*(ctx.run_workflow("item", name) for name in data))
        return list(results)

    async with app.running():
        good = await app.submit("order", ["cup", "saucer", "plate"])
        task = await ended(app, good)
        assert task.process_state is ProcessState.PROCESSED
        assert task.result == ["packed cup", "packed saucer", "packed plate"]
        kids = [s for s in task.steps if s.kind is StepKind.CHILD]
        assert [(s.seq, s.agent, s.state) for s in kids] == [
            (2, "item", StepState.COMPLETED),
            (3, "item", StepState.COMPLETED),
            (4, "item", StepState.COMPLETED),
        ]
        links = await links_of(app.operations, await app.get_task(good))
        assert [c.child_id for c in links.children] == [f"{good}.2", f"{good}.3", f"{good}.4"]
        child_links = await links_of(app.operations, await app.get_task(f"{good}.3"))
        assert child_links.parent is not None
        assert child_links.parent.parent_id == good

        bad = await app.submit("order", ["cup", "broken", "plate"])
        failed = await ended(app, bad)
    assert failed.process_state is ProcessState.COMPENSATED
    reason = failed.error["reason"]
    assert f"child task {bad}.3 ended compensated" in reason
    assert "no such item: broken" in reason
    (step,) = [s for s in failed.steps if s.seq == 3]
    assert step.state is StepState.FAILED
    assert undone == ["release"]
    # The other children ran to their end; the parent waited for them before its own.
    for seq in (2, 4):
        child = await app.get_task(f"{bad}.{seq}")
        assert child.process_state is ProcessState.PROCESSED


async def test_a_parent_awaiting_a_child_holds_no_claim_and_resumes_with_its_result(
    app: App,
) -> None:
    @app.agent("ship")
    async def ship(request: AgentRequest) -> JsonValue:
        return {"tracking": f"T-{request.payload}"}

    @app.workflow("shipment")
    async def shipment(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.sleep(HOUR)
        return await ctx.call("ship", data)

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        shipped = await ctx.run_workflow("shipment", data)
        return {"order": data, "shipped": shipped}

    clock = clock_of(app)
    async with app.running():
        task_id = await app.submit("order", 7)
        child_id = f"{task_id}.1"
        await pass_until(
            app,
            task_is(app, task_id, lambda t: _waiting(t) and bool(t.steps)),
        )
        waiting = await app.get_task(task_id)
        assert waiting.complete_by is None
        (step,) = waiting.steps
        assert (step.kind, step.state, step.agent) == (
            StepKind.CHILD,
            StepState.RUNNING,
            "shipment",
        )
        child = await app.get_task(child_id)
        assert child.key == f"{task_id}/1"
        transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            login = await http.post("/login", data={"token": TOKEN, "next": "/"})
            assert login.status_code == 303
            page = (await http.get(f"/tasks/{task_id}")).text
        assert '<dd id="waiting">on its children' in page
        assert 'id="due"' not in page
        await pass_until(app, _steps_of(app, child_id, 1))  # the child is asleep
        clock.advance(HOUR)
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert task.result == {"order": 7, "shipped": {"tracking": "T-7"}}
    parent = await links_of(app.operations, await app.get_task(child_id))
    assert parent.parent is not None
    assert parent.parent.seq == 1


def _sleepy_children(app: App, undone: list[str]) -> None:
    """`box`: two steps with undos, then an hour's sleep; `order` starts or awaits two boxes."""

    @app.agent("step")
    async def step(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.agent("unstep")
    async def unstep(request: AgentRequest) -> JsonValue:
        undone.append(f"{request.task_id} {request.payload['request']}")
        return None

    @app.workflow("box")
    async def box(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("step", "first", undo="unstep")
        await ctx.call("step", "second", undo="unstep")
        await ctx.sleep(HOUR)
        return "boxed"


async def test_cancelling_a_parent_cancels_its_children_and_undoes_their_steps_newest_first(
    app: App,
) -> None:
    undone: list[str] = []
    _sleepy_children(app, undone)

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        return list(await asyncio.gather(ctx.run_workflow("box", 1), ctx.run_workflow("box", 2)))

    async with app.running():
        task_id = await app.submit("order", None)
        kids = [f"{task_id}.1", f"{task_id}.2"]
        for kid in kids:
            await pass_until(app, _steps_of(app, kid, 3))
        await app.operations.cancel(task_id)
        task = await ended(app, task_id)
        children = [await ended(app, kid) for kid in kids]
    assert task.process_state is ProcessState.CANCELLED
    for child in children:
        assert child.process_state is ProcessState.CANCELLED
        assert child.error["reason"] == f"cancelled with its parent {task_id}"
    for kid in kids:
        mine = [u.split(" ", 1)[1] for u in undone if u.startswith(kid + " ")]
        assert mine == ["second", "first"]


async def test_started_children_go_on_or_are_cancelled_as_their_call_chose(app: App) -> None:
    undone: list[str] = []
    _sleepy_children(app, undone)

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        kept = await ctx.start_workflow("box", "kept", on_parent_end="continue")
        dropped = await ctx.start_workflow("box", "dropped", on_parent_end="cancel")
        return [kept, dropped]

    clock = clock_of(app)
    async with app.running():
        task_id = await app.submit("order", None)
        task = await ended(app, task_id)
        assert task.result == [f"{task_id}.1", f"{task_id}.2"]
        dropped = await ended(app, f"{task_id}.2")
        assert dropped.process_state is ProcessState.CANCELLED
        await pass_until(app, _steps_of(app, f"{task_id}.1", 3))
        clock.advance(HOUR)
        kept = await ended(app, f"{task_id}.1")
    assert kept.process_state is ProcessState.PROCESSED
    assert [u for u in undone if u.startswith(f"{task_id}.1 ")] == []


async def test_bad_children_are_refused_with_nothing_stored(app: App) -> None:
    seen: list[str] = []

    @app.workflow("noop")
    async def noop(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        for bad in (
            lambda: ctx.run_workflow("nowhere", 1),
            lambda: ctx.start_workflow("noop", 1, on_parent_end="later"),
            lambda: ctx.run_workflow("noop", {"x": float("nan")}),
            lambda: ctx.run_workflow("noop", 1, key=5),  # type: ignore[arg-type]
        ):
            try:
                await bad()
            except (UnknownWorkflowError, ConfigError, PayloadError) as exc:
                seen.append(type(exc).__name__)
        return "done"

    async with app.running():
        task_id = await app.submit("order", None)
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert seen == ["UnknownWorkflowError", "ConfigError", "PayloadError", "PayloadError"]
    links = await links_of(app.operations, await app.get_task(task_id))
    assert links.children == ()
    assert [s for s in task.steps if s.kind is StepKind.CHILD] == []


@sqlite_only()
async def test_the_dashboard_links_a_parent_and_its_children_both_ways(app: App) -> None:
    @app.workflow("noop")
    async def noop(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.start_workflow("noop", 1, on_parent_end="cancel")

    async with app.running():
        task_id = await app.submit("order", None)
        await ended(app, task_id)
        child_id = f"{task_id}.1"
        transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            login = await http.post("/login", data={"token": TOKEN, "next": "/"})
            assert login.status_code == 303
            parent_page = (await http.get(f"/tasks/{task_id}")).text
            child_page = (await http.get(f"/tasks/{child_id}")).text
    assert f'<a href="/tasks/{child_id}"><code>{child_id}</code></a> noop' in parent_page
    assert "(if this task ends first: cancel)" in parent_page
    assert f'<dd id="parent"><a href="/tasks/{task_id}">' in child_page


@sqlite_only()
async def test_a_child_started_from_a_handler_or_outside_its_run_is_refused(app: App) -> None:
    """A context held by an agent's handler, or by plain code after the run, starts no child."""
    captured: list[WorkflowContext] = []
    told: list[str] = []

    @app.workflow("child")
    async def child(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    @app.agent("sneaky")
    async def sneaky(request: AgentRequest) -> JsonValue:
        for start in (
            lambda: captured[0].run_workflow("child", 1),
            lambda: captured[0].start_workflow("child", 2),
        ):
            try:
                await start()
            except ConfigError as exc:
                told.append(str(exc))
        return "done"

    @app.workflow("parent")
    async def parent(ctx: WorkflowContext, data: Any) -> JsonValue:
        captured.append(ctx)
        return await ctx.call("sneaky", data)

    async with app.running():
        task = await ended(app, await app.submit("parent", {}))
    assert task.result == "done"
    with pytest.raises(ConfigError, match="outside its workflow's run"):
        await captured[0].start_workflow("child", 3)  # plain code, after the run
    assert len(told) == 2
    assert all("outside its workflow's run" in message for message in told)
    assert [t.workflow for t in await app.list_tasks()] == ["parent"]
