"""`app.call` over a real store passes the governance a step's handling passes.

A call names its entity (`entity=`): it is resolved as `ctx.call` resolves a
step's, the resolution is kept with the call, the handler sees it, and the
handling holds a slot of the entity's resource. An exclusive agent bound to a
resource of capacity 1 handles one key at a time (capacity across owners). A
failing service opens its breaker; the calls after it are answered at once
with a `BreakerOpenError`, their handler never run. Bad input is refused
before anything is sent, each error naming the agent. The same across real
processes (capacity, rate, breaker, entity): tests/e2e/test_call_governance_processes.py.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    App,
    BreakerPolicy,
    ConfigError,
    RetryPolicy,
    TaskFailedError,
    TransientError,
    WorkflowContext,
)
from shepherd.core.breaker import BreakerState
from shepherd.core.resources import Resolution, Resource
from shepherd.errors import CallFailedError, ResourceConflictError, UnknownAgentError
from shepherd.governance.batch import Batch
from support.backends import sqlite_only
from support.slots import held_slots

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 20.0
DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"}, capacity=3)
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})
ON_DB1 = Resolution(entity="user-1", partition="p1", resource=DB1)


async def mapped(app: App) -> None:
    """db1 and db2; partition p1 on db1 holding user-1."""
    await app.open()
    await app.store.add_resource(DB1)
    await app.store.add_resource(DB2)
    await app.store.move_partition("p1", "db1")
    await app.store.assign_entity("user-1", "p1")


async def test_a_calls_entity_is_resolved_kept_and_its_resource_held(
    app: App, store_url: str
) -> None:
    await mapped(app)
    seen: list[tuple[Resolution | None, list[str]]] = []

    async def look(request: AgentRequest) -> JsonValue:
        holders = [s.holder for s in await held_slots(store_url, "db1")]
        seen.append((request.resolution, holders))
        return None if request.resolution is None else request.resolution.resource.info

    app.agent("write")(look)
    app.agent("owned", exclusive_by="user")(look)

    async with app.running(["agent"]):
        routed = await app.call("write", {"user": "user-1"}, entity="user-1", timeout=PATIENCE)
        plain = await app.call("write", {"user": "user-1"}, timeout=PATIENCE)
        owned = await app.call("owned", {"user": "user-1"}, entity="user-1", timeout=PATIENCE)

    assert (routed, plain, owned) == ({"path": "one.db"}, None, {"path": "one.db"})
    (first, one), (second, none), (third, other) = seen
    assert (first, second, third) == (ON_DB1, None, ON_DB1)
    # The handlings that named the entity held a slot of its resource (capacity 3).
    assert [":call:" in holder for holder in one + none + other] == [True, True]
    assert await held_slots(store_url, "db1") == []  # given back


async def test_an_exclusive_agents_resource_caps_the_keys_handled_at_once(app: App) -> None:
    await app.open()
    await app.store.add_resource(Resource(name="db", kind="sqlite", info={}, capacity=1))
    in_flight, most = 0, 0

    @app.agent("events.write", exclusive_by="key", resource="db", batch=Batch(max_items=5))
    async def write(requests: list[AgentRequest]) -> list[JsonValue]:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)  # the resource's own work, while others may start
        in_flight -= 1
        return [r.payload for r in requests]

    async with app.running(["agent"]):
        calls = [
            app.call("events.write", {"key": f"k{n % 4}", "n": n}, timeout=PATIENCE)
            for n in range(16)
        ]
        answers = await asyncio.gather(*calls)

    assert answers == [{"key": f"k{n % 4}", "n": n} for n in range(16)]
    assert most == 1  # four keys, four owner loops: one handling at a time


async def test_a_failing_service_opens_its_breaker_and_later_calls_fail_fast(app: App) -> None:
    reached = 0

    @app.agent(
        "pay",
        breaker=BreakerPolicy(failure_threshold=3, cool_down=600.0),
        service="payments",
        retry=RetryPolicy(max_attempts=10, initial_delay=0.01, max_delay=0.01),
    )
    async def pay(request: AgentRequest) -> JsonValue:
        nonlocal reached
        reached += 1
        raise TransientError("payments is down")

    async with app.running(["agent"]):
        with pytest.raises(CallFailedError) as first:
            await app.call("pay", {"n": 0}, timeout=PATIENCE)
        assert reached == 3  # three failed tries opened the breaker; the fourth was refused
        later = []
        for n in range(1, 4):
            with pytest.raises(CallFailedError) as refused:
                await app.call("pay", {"n": n}, timeout=PATIENCE)
            later.append(refused.value)
        breaker = await app.store.get_breaker("payments")

    assert first.value.error["type"] == "BreakerOpenError"
    assert [e.error["type"] for e in later] == ["BreakerOpenError"] * 3
    assert "agent 'pay': the circuit breaker of service 'payments' is open" in str(later[0])
    assert reached == 3  # none of the later calls reached the handler
    assert breaker is not None
    assert breaker.state is BreakerState.OPEN


async def test_an_entity_living_elsewhere_than_the_agents_resource_is_refused(app: App) -> None:
    await mapped(app)
    ran: list[object] = []

    @app.agent("write", resource="db2")
    async def write(request: AgentRequest) -> JsonValue:
        ran.append(request.payload)
        return None

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data, entity="user-1")

    with pytest.raises(ResourceConflictError) as refused:
        await app.call("write", {"n": 1}, entity="user-1", timeout=PATIENCE)
    assert await app.store.take_calls(worker="probe", agents=["write"], limit=10) == ([], [])
    async with app.running():
        task_id = await app.submit("save", {"n": 2})
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)

    assert str(refused.value) == (
        "agent 'write': it is bound to resource 'db2' (resource=), but entity 'user-1' lives "
        "on resource 'db1' (partition 'p1'); drop resource= to follow the entity, or call "
        "without entity=; nothing was sent"
    )
    assert "agent 'write': it is bound to resource 'db2'" in str(failed.value)
    assert ran == []


@sqlite_only()  # refused before the store is touched
async def test_bad_calls_are_refused_naming_the_agent(app: App) -> None:
    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        return None

    with pytest.raises(ConfigError, match="call to agent 'write': must be a str, not int"):
        await app.call("write", {}, entity=42)  # type: ignore[arg-type]
    with pytest.raises(UnknownAgentError, match="unknown agent 'nope'"):
        await app.call("nope", {}, entity="user-1")


@sqlite_only()  # refused at registration
def test_options_that_would_be_ignored_together_are_refused_naming_the_agent(app: App) -> None:
    async def handler(request: AgentRequest) -> JsonValue:
        return None

    with pytest.raises(ConfigError, match="agent 'plain': only an exclusive agent"):
        app.agent("plain", batch=Batch())
    with pytest.raises(ConfigError, match="agent 'handler': only an exclusive agent"):
        app.agent(batch=Batch())(handler)  # named after its function
    with pytest.raises(ConfigError, match="agent 'odd': must be a Batch"):
        app.agent("odd", exclusive_by="k", batch=5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="agent 'quote': service= names the circuit breaker"):
        app.agent("quote", service="prices")(handler)
    assert app.agents == {}
    app.agent("charge", service="payments", breaker=BreakerPolicy(failure_threshold=3))(handler)
    app.agent("refund", service="payments", breaker=BreakerPolicy(failure_threshold=3))(handler)
    with pytest.raises(
        ConfigError,
        match="agent 'void': service 'payments' shares one breaker with agent 'charge', "
        "declared with another policy",
    ):
        app.agent("void", service="payments", breaker=BreakerPolicy(failure_threshold=5))(handler)
    assert sorted(app.agents) == ["charge", "refund"]
