"""A step's resolution: `start_step` records it on the step and on its request, together.

The resolution (where the call's entity lived when the step was first sent) is
what a retried or recovered step is sent with again, so it must read back from
both rows exactly as written, on every backend, alone or in a group commit.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from shepherd.core.resources import Resolution, Resource
from shepherd.core.states import StepState
from shepherd.errors import PayloadError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from support.factories import (
    claimed_task,
    snapshot,
    step_start,
    submitted_task,
    supervisor_reset,
    taken_request,
)

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

ORDERS_1 = Resource(
    name="orders-1",
    kind="sqlite",
    info={"path": "/data/orders-1.db", "options": {"timeout": 2.5, "tags": ["eu", "ü"]}},
    capacity=3,
    rate=10.5,
)
ORDERS_2 = Resource(name="orders-2", kind="sqlite", info={})


def resolution(
    entity: str = "user-42", partition: str = "p1", resource: Resource = ORDERS_1
) -> Resolution:
    return Resolution(entity=entity, partition=partition, resource=resource)


async def test_start_step_records_the_resolution_on_the_step_and_its_request(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    where = resolution()

    await store.start_step(replace(step_start(task, seq=1, agent="a"), resolution=where))

    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert step.state is StepState.RUNNING
    assert step.resolution == where
    request = await taken_request(store, agent="a")
    assert request.resolution == where


async def test_a_step_without_an_entity_has_no_resolution(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")

    await store.start_step(step_start(task, seq=1, agent="a"))

    after = await store.get_task(task.id)
    assert after is not None
    assert [s.resolution for s in after.steps] == [None]
    assert (await taken_request(store, agent="a")).resolution is None


async def test_steps_started_together_keep_their_own_resolutions(store: Store) -> None:
    tasks = [await submitted_task(store, data={"i": i}) for i in range(3)]
    claimed = {t.id: t for t in await store.claim_tasks(locked_by="s1", limit=10)}
    assert set(claimed) == {t.id for t in tasks}
    wanted = {
        tasks[0].id: resolution("user-1", "p1", ORDERS_1),
        tasks[1].id: None,
        tasks[2].id: resolution("user-2", "p2", ORDERS_2),
    }

    # Started at once: the writes may share a transaction (group commit).
    await asyncio.gather(
        *(
            store.start_step(replace(step_start(claimed[task_id], seq=1), resolution=where))
            for task_id, where in wanted.items()
        )
    )

    for task_id, where in wanted.items():
        after = await store.get_task(task_id)
        assert after is not None
        assert [s.resolution for s in after.steps] == [where]
    taken = await store.take_requests(agents=["a"], worker="w1", limit=10)
    assert {r.task_id: r.resolution for r in taken} == wanted


async def test_a_later_attempt_is_recorded_with_the_resolution_it_is_sent_with(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    first = resolution()
    await store.start_step(replace(step_start(task, seq=1), resolution=first))
    reset = await supervisor_reset(store, fake_clock, task)
    (again,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert again.id == reset.id
    assert [s.resolution for s in again.steps] == [first], "a claim reads the recorded one"

    await store.start_step(replace(step_start(again, seq=1, attempt=2), resolution=first))

    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.attempt, s.resolution) for s in after.steps] == [(2, first)]
    request = await taken_request(store, agent="a")
    assert (request.attempt, request.resolution) == (2, first)


async def test_an_unencodable_resolution_is_refused_and_changes_nothing(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    before = await snapshot(store, task.id)
    huge = Resource(name="big", kind="http", info={"blob": "x" * (2 * MAX_PAYLOAD_BYTES)})

    with pytest.raises(PayloadError):
        await store.start_step(
            replace(step_start(task, seq=1), resolution=resolution(resource=huge))
        )

    assert await snapshot(store, task.id) == before
    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []
