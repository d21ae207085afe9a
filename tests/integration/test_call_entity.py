"""`ctx.call(agent, payload, entity=...)` over a real store: the agent receives the entity's resolution.

The step is resolved when it is first sent and the resolution is recorded with
it; a step sent again (its first attempt gave up, the supervisor reset the
task) is sent with the recorded resolution even though the entity moved in
between, while a step that starts after the move sees the new resource. An
entity that cannot be resolved fails its step permanently, naming the entity.
A step recovered after its scheduler process died is in
tests/e2e/test_entity_recovery.py. The step sent again waits for its window on
a FakeClock (`fake_time`), which the test moves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    App,
    PermanentError,
    ProcessState,
    RetryPolicy,
    StepState,
    TaskFailedError,
    TransientError,
    WorkflowContext,
)
from shepherd.core.resources import Resolution, Resource
from shepherd.errors import UnresolvedEntityError
from shepherd.governance.resolver import StaticResolver
from shepherd.testing import wait_until
from support.fake_time import WINDOW, has_event, pass_until

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 20.0

DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"}, capacity=3)
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})
ON_DB1 = Resolution(entity="user-1", partition="p1", resource=DB1)
ON_DB2 = Resolution(entity="user-1", partition="p2", resource=DB2)


async def mapped(app: App) -> None:
    """db1 and db2; partition p1 on db1 holding user-1; partition p2 on db2, empty."""
    await app.open()
    await app.store.add_resource(DB1)
    await app.store.add_resource(DB2)
    await app.store.move_partition("p1", "db1")
    await app.store.move_partition("p2", "db2")
    await app.store.assign_entity("user-1", "p1")


async def test_the_agent_receives_the_resolution_of_the_calls_entity(app: App) -> None:
    await mapped(app)
    seen: list[Resolution | None] = []

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        seen.append(request.resolution)
        where = request.resolution
        return {"path": None if where is None else where.resource.info["path"]}

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        routed = await ctx.call("write", data, entity=data["user"])
        plain = await ctx.call("write", data)
        return [routed, plain]

    async with app.running():
        task_id = await app.submit("save", {"user": "user-1"})
        assert await app.result(task_id, timeout=PATIENCE) == [{"path": "one.db"}, {"path": None}]

    assert seen == [ON_DB1, None]
    task = await app.get_task(task_id)
    assert [(s.state, s.resolution) for s in task.steps] == [
        (StepState.COMPLETED, ON_DB1),
        (StepState.COMPLETED, None),
    ]


@pytest.fixture
async def static_app(store_url: str) -> AsyncIterator[App]:
    """An app whose resolver is the seed's static resolution: user N -> partition N % 2."""

    def by_number(entity: str) -> tuple[str, str]:
        number = int(entity.removeprefix("user-"))
        return (f"even-{number % 4}", "db1") if number % 2 == 0 else (f"odd-{number % 4}", "db2")

    app = App(
        store_url,
        alerts=(),
        resolver=StaticResolver(by_number),
        supervisor_interval=0.1,
        poll_interval=0.05,
        lease_ttl=1.0,
        sqlite_synchronous="NORMAL",
    )
    app.resource("db1", kind=DB1.kind, info=DB1.info, capacity=DB1.capacity)
    app.resource("db2", kind=DB2.kind, info=DB2.info)
    try:
        yield app
    finally:
        await app.close()


async def test_a_static_resolver_resolves_the_calls_entity(static_app: App) -> None:
    app = static_app
    seen: dict[str, Resolution | None] = {}

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        seen[request.payload["user"]] = request.resolution
        return None

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data, entity=data["user"])

    async with app.running():
        ids = [await app.submit("save", {"user": user}) for user in ("user-3", "user-4")]
        for task_id in ids:
            await app.result(task_id, timeout=PATIENCE)

    assert seen == {
        "user-3": Resolution(entity="user-3", partition="odd-3", resource=DB2),
        "user-4": Resolution(entity="user-4", partition="even-0", resource=DB1),
    }


@pytest.mark.fake_time
async def test_a_step_sent_again_keeps_its_first_resolution_though_the_entity_moved(
    app: App,
) -> None:
    await mapped(app)
    seen: list[tuple[str, int, Resolution | None]] = []

    # One try per attempt: the transient failure gives the attempt up, the step's
    # window passes, and the supervisor resets the task, which sends the step again.
    @app.agent("write", retry=RetryPolicy(max_attempts=1))
    async def write(request: AgentRequest) -> JsonValue:
        seen.append((request.payload["name"], request.attempt, request.resolution))
        if request.payload["name"] == "first" and request.attempt == 1:
            await app.store.assign_entity("user-1", "p2")  # the entity moves meanwhile
            raise TransientError("the database is restarting")
        return {"attempt": request.attempt}

    @app.workflow("save", complete_within=5 * WINDOW)
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data, within=WINDOW, entity="user-1")

    async with app.running():
        first = await app.submit("save", {"name": "first"})
        await wait_until(lambda: len(seen) == 1, timeout=PATIENCE)
        await pass_until(app, has_event(app, first, "reset"))
        assert await app.result(first, timeout=PATIENCE) == {"attempt": 2}
        later = await app.submit("save", {"name": "later"})  # starts after the move
        assert await app.result(later, timeout=PATIENCE) == {"attempt": 1}

    assert seen == [("first", 1, ON_DB1), ("first", 2, ON_DB1), ("later", 1, ON_DB2)]
    task = await app.get_task(first)
    assert task.failure_count == 1
    assert [(s.attempt, s.resolution) for s in task.steps] == [(2, ON_DB1)]
    assert "reset" in [e.kind for e in await app.history(first)]
    assert await app.resolver.resolve("user-1") == ON_DB2


async def test_an_undo_acts_on_its_forward_steps_resolution(app: App) -> None:
    await mapped(app)
    undone: list[Resolution | None] = []

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        return {"written": True}

    @app.agent("unwrite")
    async def unwrite(request: AgentRequest) -> JsonValue:
        undone.append(request.resolution)
        return None

    @app.agent("ship")
    async def ship(request: AgentRequest) -> JsonValue:
        await app.store.assign_entity("user-1", "p2")
        raise PermanentError("address unknown")

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("write", data, entity="user-1", undo="unwrite")
        return await ctx.call("ship", data)

    async with app.running():
        task_id = await app.submit("order", {})
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)

    assert failed.value.state == ProcessState.COMPENSATED
    assert undone == [ON_DB1]
    task = await app.get_task(task_id)
    assert [(s.agent, s.resolution) for s in task.steps] == [
        ("write", ON_DB1),
        ("ship", None),
        ("unwrite", ON_DB1),
    ]


async def test_an_unresolvable_entity_fails_its_step_naming_the_entity(app: App) -> None:
    await mapped(app)
    called: list[str] = []
    raised: list[PermanentError] = []

    @app.agent("reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        called.append("reserve")
        return None

    @app.agent("unreserve")
    async def unreserve(request: AgentRequest) -> JsonValue:
        called.append("unreserve")
        return None

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        called.append("write")
        return None

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        try:
            return await ctx.call("write", data, entity="nobody")
        except PermanentError as exc:
            raised.append(exc)
            raise

    async with app.running():
        task_id = await app.submit("order", {})
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)

    # Compensated as a permanent failure is, and nothing was sent to `write`.
    assert failed.value.state == ProcessState.COMPENSATED
    assert called == ["reserve", "unreserve"]
    (error,) = raised
    assert (error.agent, error.seq) == ("write", 2)
    assert "entity 'nobody' cannot be resolved" in error.message
    assert isinstance(error.__cause__, UnresolvedEntityError)
    assert error.detail["entity"] == "nobody"
    assert error.detail["type"] == "UnresolvedEntityError"
    task = await app.get_task(task_id)
    assert "entity 'nobody' cannot be resolved" in task.error["reason"]
    assert [s.agent for s in task.steps] == ["reserve", "unreserve"]
