"""Steps through an exclusive agent (`ctx.call`): their key's owner handles them, one at a time
per key, batched when the agent batches; a step keeps its own rules; what is not built is refused.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, BreakerPolicy, PermanentError, RetryPolicy, Submission, TransientError
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError
from shepherd.governance.batch import Batch
from support.backends import sqlite_only

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue

PATIENCE = 30.0
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


@sqlite_only()  # the refusal is the scheduler's, whatever the store
async def test_a_step_to_an_exclusive_agent_with_an_entity_is_refused_not_ignored(
    app: App,
) -> None:
    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: AgentRequest) -> JsonValue:
        return None

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        try:
            return await ctx.call("ledger", data, entity="user-1")
        except ConfigError as exc:
            return {"refused": str(exc)}

    async with app, app.running(["scheduler"]):
        task_id = await app.submit("order", {"user": "user-1"})
        result = await app.result(task_id, timeout=PATIENCE)

    assert "agent 'ledger' is exclusive" in result["refused"]
    assert "entity= is refused rather than ignored" in result["refused"]


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


@sqlite_only()  # the refusal is the scheduler's, whatever the store
async def test_a_step_to_an_exclusive_agent_with_a_resource_or_breaker_is_refused(
    app: App,
) -> None:
    async def handler(request: AgentRequest) -> JsonValue:
        return None

    # app.call to them is governed (test_call_governance); a step is not yet.
    app.agent("ledger", exclusive_by="user", resource="db")(handler)
    app.agent("mailer", exclusive_by="user", breaker=BreakerPolicy())(handler)

    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        refused = []
        for agent in ("ledger", "mailer"):
            try:
                await ctx.call(agent, data)
            except ConfigError as exc:
                refused.append(str(exc))
        return refused

    async with app, app.running(["scheduler"]):
        task_id = await app.submit("order", {"user": "user-1"})
        result = await app.result(task_id, timeout=PATIENCE)

    assert isinstance(result, list)
    assert len(result) == 2
    assert "agent 'ledger' is exclusive (exclusive_by=...) and declares resource=" in result[0]
    assert "agent 'mailer' is exclusive (exclusive_by=...) and declares breaker=" in result[1]
    assert all("refused rather than run ungoverned" in r for r in result)
