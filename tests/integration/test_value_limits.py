"""Every limit of `shepherd.core.limits` on both backends: the longest value round-trips,
one byte more is refused with the same error naming the field and the limit, and
nothing is stored.

The longest values are random 4-byte characters (`widest`): a value PostgreSQL
cannot compress, so its index rows are as wide as the limits allow (the widest
are `(workflow, key)` and `(agent, owner key)`). One byte more is the same
value after an ASCII letter.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from shepherd import App, ConfigError, PayloadError, Submission, WorkflowContext
from shepherd.agents import AgentRequest
from shepherd.core.breaker import BreakerPolicy
from shepherd.core.limits import KEY_BYTES, NAME_BYTES
from shepherd.core.resources import Resource
from shepherd.errors import InvalidResourceError, OwnerKeyError


def widest(n_bytes: int, seed: int) -> str:
    """`n_bytes` of UTF-8 in random 4-byte characters (none of which compress)."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x20000, 0x2A6D0)) for _ in range(n_bytes // 4))


def over(value: str) -> str:
    """`value` one byte longer."""
    return "a" + value


def test_the_values_are_as_long_as_the_limits() -> None:
    assert len(widest(KEY_BYTES, 0).encode()) == KEY_BYTES
    assert len(over(widest(NAME_BYTES, 0)).encode()) == NAME_BYTES + 1


async def test_a_workflow_name_key_and_reply_to_at_their_limits_round_trip(app: App) -> None:
    workflow, key, reply_to = widest(NAME_BYTES, 1), widest(KEY_BYTES, 2), widest(KEY_BYTES, 3)

    @app.workflow(workflow)
    async def flow(ctx: WorkflowContext, data: Any) -> Any:
        return data

    task_id = await app.submit(workflow, {"n": 1}, key=key, reply_to=reply_to)

    task = await app.get_task(task_id)
    assert (task.workflow, task.key, task.reply_to) == (workflow, key, reply_to)
    assert await app.submit(workflow, {"n": 1}, key=key) == task_id  # found by its key
    events = [event async for event in _first_events(app, reply_to)]
    assert [(e.task_id, e.reply_to) for e in events] == [(task_id, reply_to)]


async def _first_events(app: App, reply_to: str) -> Any:
    async for event in app.events(reply_to):
        yield event
        return


@pytest.mark.parametrize("field", ["key", "reply_to"])
async def test_a_key_or_reply_to_one_byte_over_is_refused_and_nothing_is_stored(
    app: App, field: str
) -> None:
    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> Any:
        return data

    text: Any = over(widest(KEY_BYTES, 4))
    with pytest.raises(PayloadError) as refused:
        await app.submit("wf", 1, **{field: text})

    assert refused.value.message.startswith(
        f"{field} is {KEY_BYTES + 1} bytes of UTF-8, over its limit of {KEY_BYTES} bytes"
    )
    assert await app.list_tasks() == []


async def test_submit_many_refuses_a_key_one_byte_over_by_its_index_and_stores_nothing(
    app: App,
) -> None:
    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> Any:
        return data

    key = widest(KEY_BYTES, 15)
    batch = [Submission("wf", 1, key=key), Submission("wf", 2, key=over(key))]

    with pytest.raises(PayloadError) as refused:
        await app.submit_many(batch)

    assert refused.value.message.startswith(
        f"submissions[1]: key is {KEY_BYTES + 1} bytes of UTF-8, over its limit of {KEY_BYTES}"
    )
    assert await app.list_tasks() == []
    (task_id,) = await app.submit_many(batch[:1])
    assert (await app.get_task(task_id)).key == key


def test_a_workflow_agent_or_service_name_one_byte_over_is_refused(app: App) -> None:
    name = over(widest(NAME_BYTES, 5))
    problem = f"name is {NAME_BYTES + 1} bytes of UTF-8, over its limit of {NAME_BYTES} bytes"

    async def handler(request: AgentRequest) -> Any:
        return None

    with pytest.raises(ConfigError, match=f"workflow {problem}"):
        app.workflow(name)(handler)
    with pytest.raises(ConfigError, match=f"agent {problem}"):
        app.agent(name)(handler)
    with pytest.raises(ConfigError, match=f"service {problem}"):
        app.agent("fine", service=name)
    assert (app.workflows, app.agents) == ({}, {})


async def test_an_agent_name_and_owner_key_at_their_limits_round_trip(app: App) -> None:
    agent, owner_key = widest(NAME_BYTES, 6), widest(KEY_BYTES, 7)

    @app.agent(agent, exclusive_by="k", service=widest(NAME_BYTES, 9), breaker=BreakerPolicy())
    async def handler(request: AgentRequest) -> Any:
        return request.owner_key

    async with app.running(["agent"]):
        answer = await app.call(agent, {"k": owner_key}, timeout=60)
        with pytest.raises(OwnerKeyError) as refused:
            await app.call(agent, {"k": over(owner_key)}, timeout=60)

    assert answer == owner_key
    assert isinstance(refused.value, PayloadError)
    assert f"is {KEY_BYTES + 1} bytes of UTF-8, over its limit of {KEY_BYTES}" in (
        refused.value.message
    )


async def test_a_once_name_at_its_limit_round_trips_and_one_byte_over_is_refused(
    app: App,
) -> None:
    agent, once_name = widest(NAME_BYTES, 14), widest(KEY_BYTES, 8)
    runs: list[str] = []

    @app.agent(agent)
    async def charge(request: AgentRequest) -> Any:
        async def effect() -> Any:
            runs.append("charged")
            return "charged"

        try:
            await request.once(effect, name=over(once_name))
        except PayloadError as exc:
            refused = exc.message
        return {"once": await request.once(effect, name=once_name), "refused": refused}

    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> Any:
        return await ctx.call(agent, data)

    async with app.running(["scheduler", "agent"]):
        result = await app.result(await app.submit("wf", 1), timeout=60)

    assert result == {
        "once": "charged",
        "refused": f"once name is {KEY_BYTES + 1} bytes of UTF-8, over its limit of "
        f"{KEY_BYTES} bytes (it starts {over(once_name)[:40]!r})",
    }
    assert runs == ["charged"]  # the refused name ran nothing


async def test_resource_partition_and_entity_names_at_their_limits_round_trip(app: App) -> None:
    resource, partition, entity = (widest(NAME_BYTES, n) for n in (10, 11, 12))
    operations = await app.operations.open()

    await operations.add_resource(Resource(name=resource, kind="db", info={}))
    await operations.move_partition(partition, resource)
    await operations.assign_entity(entity, partition)

    resolution, _version = await app.store.resolve(entity)
    assert resolution is not None
    assert (resolution.entity, resolution.partition, resolution.resource.name) == (
        entity,
        partition,
        resource,
    )
    changes = [
        lambda: operations.add_resource(Resource(name=over(resource), kind="db", info={})),
        lambda: operations.move_partition(over(partition), resource),
        lambda: operations.assign_entity(over(entity), partition),
    ]
    for change in changes:
        with pytest.raises(InvalidResourceError, match=f"over its limit of {NAME_BYTES} bytes"):
            await change()
    assert [r.name for r in await operations.resources()] == [resource]
    assert [p.name for p in await operations.partitions()] == [partition]


async def test_by_at_its_limit_round_trips_and_one_byte_over_is_refused(app: App) -> None:
    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> Any:
        return data

    by = widest(NAME_BYTES, 13)
    first, second = await app.submit("wf", 1), await app.submit("wf", 2)
    operations = await app.operations.open()

    with pytest.raises(ConfigError, match=f"over its limit of {NAME_BYTES} bytes"):
        await operations.cancel(first, by=over(by))
    assert (await operations.get_task(first)).process_state == "pending"
    await operations.cancel(second, by=by)

    history = await operations.history(second)
    assert any(isinstance(e.detail, dict) and e.detail.get("by") == by for e in history)
