"""Steps through an exclusive agent (`ctx.call`): their key's owner handles them, one at a time
per key, batched when the agent batches; a step keeps its own rules; the handling passes the
same gates as a plain step's (a capacity slot of the agent's or the entity's resource, the breaker,
whose open state holds steps back, and the rate); what is not built is refused.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, BreakerPolicy, PermanentError, RetryPolicy, Submission, TransientError
from shepherd.core.breaker import BreakerState
from shepherd.core.resources import Resolution, Resource
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError
from shepherd.governance.batch import Batch
from support import fake_time
from support.backends import sqlite_only
from support.fake_time import WINDOW
from support.slots import held_slots

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue

PATIENCE = 30.0
DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"}, capacity=3)
USERS = [f"user-{n}" for n in range(3)]


async def test_steps_of_one_key_run_one_at_a_time_each_once_with_the_owner_state(
    app: App,
) -> None:
    handled: dict[str, list[int]] = defaultdict(list)
    in_flight: dict[str, int] = defaultdict(int)
    most = 0

    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: AgentRequest) -> JsonValue:
        nonlocal most
        key = str(request.owner_key)
        in_flight[key] += 1
        most = max(most, in_flight[key])
        await asyncio.sleep(0)  # let another handling of the key run now, if one could
        handled[key].append(request.payload["n"])
        count = request.owner_state["count"] if isinstance(request.owner_state, dict) else 0
        request.owner_state = {"count": count + 1}
        in_flight[key] -= 1
        return {"count": count + 1, "key": request.idempotency_key}

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data)

    async with app, app.running(["scheduler", "agent", "supervisor"]):
        ids = [await app.submit("order", {"user": u, "n": n}) for n in range(6) for u in USERS]
        results = [await app.result(i, timeout=PATIENCE) for i in ids]
        tasks = [await app.store.get_task(i) for i in ids]
        (lease, *_) = await app.store.list_key_leases("ledger")
        taken = await app.store.take_keys("ledger", USERS, owner=lease.owner, lease=10.0)

    assert most == 1
    # (The order of a key's steps is checked across processes, by queue position, in
    # tests/e2e/test_owned_steps_processes.py.)
    assert sorted(handled) == USERS
    assert all(sorted(v) == list(range(6)) for v in handled.values()), handled
    for u in USERS:  # each step of a user counted once, in the key's one owner state
        assert sorted(r["count"] for r in results[USERS.index(u) :: 3]) == list(range(1, 7))
    assert {t.state["count"] for t in taken if t.lease.key in USERS} == {6}
    assert all(t is not None and t.process_state is ProcessState.PROCESSED for t in tasks)
    assert all(t is not None and t.failure_count == 0 for t in tasks)
    assert results[0]["key"] == f"{ids[0]}/1"


async def test_a_batching_agent_gets_lists_and_each_step_its_own_result(app: App) -> None:
    sizes: list[int] = []

    @app.agent("ledger", exclusive_by="user", batch=Batch(max_items=50, max_delay=0.05))
    async def ledger(requests: list[AgentRequest]) -> list[JsonValue]:
        assert isinstance(requests, list)
        sizes.append(len(requests))
        return [{"n": r.payload["n"], "task": r.task_id} for r in requests]

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data)

    async with app, app.running(["scheduler", "agent", "supervisor"]):
        ids = await app.submit_many(
            [Submission("order", {"user": USERS[n % 3], "n": n}) for n in range(30)]
        )
        results = [await app.result(i, timeout=PATIENCE) for i in ids]

    assert [r["n"] for r in results] == list(range(30))
    assert [r["task"] for r in results] == ids
    assert sum(sizes) == 30


async def test_a_step_keeps_its_retry_policy_and_fails_permanently_without_a_key(
    app: App,
) -> None:
    tries: dict[str, int] = defaultdict(int)

    @app.agent(
        "ledger",
        exclusive_by="user",
        retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.01),
    )
    async def ledger(request: AgentRequest) -> JsonValue:
        tries[request.task_id] += 1
        if request.retry < 2:
            raise TransientError("the ledger is busy")
        return {"tries": request.retry + 1}

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        try:
            return await ctx.call("ledger", data)
        except PermanentError as exc:
            return {"refused": str(exc)}

    async with app, app.running(["scheduler", "agent", "supervisor"]):
        good = await app.submit("order", {"user": "u"})
        bad = await app.submit("order", {"nobody": "u"})
        assert await app.result(good, timeout=PATIENCE) == {"tries": 3}
        refused = await app.result(bad, timeout=PATIENCE)

    assert refused == {
        "refused": "call to exclusive agent 'ledger': the payload has no 'user' field; "
        "nothing was sent"
    }
    assert tries == {good: 3}


@sqlite_only()  # refused before the store is touched
async def test_what_an_owner_does_not_apply_yet_is_refused_naming_the_agent(app: App) -> None:
    async def handler(request: AgentRequest) -> JsonValue:
        return None

    app.agent("ledger", exclusive_by="user")(handler)
    app.agent("refund")(handler)

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("refund", data, undo="ledger")

    with pytest.raises(ConfigError) as refused:
        app.check()
    assert "workflow 'order' names exclusive agent 'ledger' as an undo" in str(refused.value)
    assert "an exclusive agent cannot undo a step yet" in str(refused.value)


async def test_a_step_with_an_entity_records_its_resolution_and_holds_its_slot(
    app: App, store_url: str
) -> None:
    await app.open()
    await app.store.add_resource(DB1)
    await app.store.move_partition("p1", "db1")
    await app.store.assign_entity("user-1", "p1")
    seen: list[tuple[Resolution | None, list[str]]] = []

    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: AgentRequest) -> JsonValue:
        holders = [s.holder for s in await held_slots(store_url, "db1")]
        seen.append((request.resolution, holders))
        return None if request.resolution is None else request.resolution.resource.info

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data, entity="user-1")

    async with app.running(["scheduler", "agent", "supervisor"]):
        task_id = await app.submit("order", {"user": "user-1"})
        result = await app.result(task_id, timeout=PATIENCE)
        task = await app.get_task(task_id)
        slots_after = await held_slots(store_url, "db1")

    expected = Resolution(entity="user-1", partition="p1", resource=DB1)
    assert result == {"path": "one.db"}
    ((resolution, holders),) = seen
    assert resolution == expected  # the handler sees it
    assert [s.resolution for s in task.steps] == [expected]  # recorded on the step
    assert len(holders) == 1  # the owner's handling held a slot of the entity's resource
    assert slots_after == []  # given back


async def test_a_step_through_an_owner_keeps_its_window_and_is_retried_by_the_supervisor(
    app: App,
) -> None:
    attempts: list[int] = []

    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: AgentRequest) -> JsonValue:
        attempts.append(request.attempt)
        if request.attempt == 1:
            await asyncio.Event().wait()  # hangs past the step's window
        return {"attempt": request.attempt}

    @app.workflow("order", max_failures=3)
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data, within=0.5)

    async with app, app.running(["scheduler", "agent", "supervisor"]):
        task_id = await app.submit("order", {"user": "u"})
        result = await app.result(task_id, timeout=PATIENCE)
        task = await app.store.get_task(task_id)
        kinds = [e.kind for e in await app.store.task_events(task_id)]

    assert result == {"attempt": 2}
    assert attempts == [1, 2]
    assert task is not None
    assert task.failure_count == 1  # the step's window passed: the step's rule, not a call's
    assert "step_timed_out" in kinds


async def test_a_step_through_an_owner_may_beat_and_run_an_effect_once(app: App) -> None:
    effects: list[str] = []

    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: AgentRequest) -> JsonValue:
        before = request.complete_by
        after = await request.heartbeat()

        async def charge() -> JsonValue:
            effects.append(request.task_id)
            return {"charged": request.payload["amount"]}

        first = await request.once(charge, name="charge")
        again = await request.once(charge, name="charge")
        return {"moved": after >= before, "first": first, "again": again}

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data)

    async with app, app.running(["scheduler", "agent", "supervisor"]):
        task_id = await app.submit("order", {"user": "u", "amount": 5})
        result = await app.result(task_id, timeout=PATIENCE)

    assert result == {"moved": True, "first": {"charged": 5}, "again": {"charged": 5}}
    assert effects == [task_id]


async def test_steps_of_four_keys_through_a_resource_of_capacity_1_run_one_at_a_time(
    app: App, store_url: str
) -> None:
    await app.open()
    await app.store.add_resource(Resource(name="db", kind="sqlite", info={}, capacity=1))
    events: list[tuple[str, str]] = []
    sizes: list[int] = []

    @app.agent("ledger", exclusive_by="user", resource="db")
    async def ledger(request: AgentRequest) -> JsonValue:
        events.append(("start", str(request.owner_key)))
        await asyncio.sleep(0.01)  # the resource's own work, while other keys could start
        events.append(("end", str(request.owner_key)))
        return request.payload

    # A batch is one handling: it holds one slot of the same resource.
    @app.agent("journal", exclusive_by="user", resource="db", batch=Batch(max_items=10))
    async def journal(requests: list[AgentRequest]) -> list[JsonValue]:
        sizes.append(len(requests))
        events.append(("start", str(requests[0].owner_key)))
        await asyncio.sleep(0.01)
        events.append(("end", str(requests[0].owner_key)))
        return [r.payload["n"] for r in requests]

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return [await ctx.call("ledger", data), await ctx.call("journal", data)]

    keys = [f"user-{n}" for n in range(4)]
    async with app.running(["scheduler", "agent", "supervisor"]):
        ids = [await app.submit("order", {"user": k, "n": n}) for n in range(3) for k in keys]
        results = [await app.result(i, timeout=PATIENCE) for i in ids]
        slots_after = await held_slots(store_url, "db")

    assert results == [[{"user": k, "n": n}, n] for n in range(3) for k in keys]
    at_once, most = 0, 0
    for event, _ in events:  # the handlers' own events: how many handlings were under way
        at_once += 1 if event == "start" else -1
        most = max(most, at_once)
    assert most == 1
    assert sorted({k for _, k in events}) == keys  # four keys, four owner loops per agent
    assert sum(sizes) == len(ids)
    assert len(events) == 2 * (len(ids) + len(sizes))
    assert slots_after == []


@pytest.mark.fake_time
async def test_an_open_breaker_holds_steps_back_until_it_closes(app: App) -> None:
    policy = BreakerPolicy(failure_threshold=2, cool_down=3.0)
    down = True
    tries: list[tuple[str, bool]] = []

    @app.agent(
        "ledger",
        exclusive_by="user",
        breaker=policy,
        service="ledger-db",
        retry=RetryPolicy(max_attempts=100, initial_delay=0.1, max_delay=0.1),
    )
    async def ledger(request: AgentRequest) -> JsonValue:
        tries.append((str(request.owner_key), down))
        if down:
            raise TransientError("the ledger database is down")
        return request.payload

    @app.workflow("order", max_failures=1)
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data, within=WINDOW)

    async def opened() -> bool:
        breaker = await app.store.get_breaker("ledger-db")
        return breaker is not None and breaker.state is BreakerState.OPEN

    async with app.running(["scheduler", "agent", "supervisor"]):
        first = await app.submit("order", {"user": "user-0"})
        await fake_time.pass_until(app, opened, message="the breaker did not open")
        later = [await app.submit("order", {"user": u}) for u in USERS]
        down = False  # the service is back; only the half-open probe finds out
        tasks = [await fake_time.ended(app, i) for i in [first, *later]]
        breaker = await app.store.get_breaker("ledger-db")
        history = [e.kind for t in tasks for e in await app.history(t.id)]

    # The steps waited while it was open: none failed, none was tried meanwhile.
    assert [t.process_state for t in tasks] == [ProcessState.PROCESSED] * 4
    assert all(t.failure_count == 0 for t in tasks)
    assert tries[: policy.failure_threshold] == [("user-0", True)] * policy.failure_threshold
    assert all(not was_down for _, was_down in tries[policy.failure_threshold :])
    assert sorted(k for k, _ in tries[policy.failure_threshold :]) == sorted(["user-0", *USERS])
    assert "step_failed" not in history
    assert breaker is not None
    assert breaker.state is BreakerState.CLOSED


@pytest.mark.fake_time
async def test_steps_through_an_owner_obey_the_resources_rate(app: App) -> None:
    await app.open()
    await app.store.add_resource(Resource(name="api", kind="http", info={}, rate=1.0))
    tried: list[float] = []

    @app.agent("ledger", exclusive_by="user", resource="api")
    async def ledger(request: AgentRequest) -> JsonValue:
        tried.append(app.store.now().timestamp())
        return request.payload

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        return await ctx.call("ledger", data, within=60.0)

    async with app.running(["scheduler", "agent", "supervisor"]):
        ids = [await app.submit("order", {"user": f"user-{n}"}) for n in range(8)]
        tasks = [await fake_time.ended(app, i) for i in ids]

    assert [t.process_state for t in tasks] == [ProcessState.PROCESSED] * 8
    assert len(tried) == 8
    # At 1 call/s (one second's burst, tokens spent within HOLD = 1 s), n calls span
    # at least (n - 1) - 1 seconds; ungoverned, all eight would come at once.
    assert max(tried) - min(tried) >= 8 - 1 - 1
