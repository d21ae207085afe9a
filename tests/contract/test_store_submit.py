"""Submission: a task is inserted with its `received` event, idempotently per key."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState
from shepherd.errors import PayloadError
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.store.contract import Store


def _nested(depth: int) -> JsonValue:
    value: JsonValue = []
    for _ in range(depth):
        value = [value]
    return value


async def test_submit_inserts_a_pending_unowned_task_with_its_received_event(store: Store) -> None:
    submitted = await store.submit_task(new_task("wf", {"order": 1}, key="o-1", reply_to="inbox"))

    assert submitted.created
    task = await store.get_task(submitted.task_id)
    assert task is not None
    assert task.process_state is ProcessState.PENDING
    assert (task.locked_by, task.lock_epoch, task.failure_count) == (None, 0, 0)
    assert (task.input, task.key, task.reply_to) == ({"order": 1}, "o-1", "inbox")
    events = await store.task_events(task.id)
    assert [(e.kind, e.key, e.reply_to) for e in events] == [("received", "o-1", "inbox")]


async def test_a_repeated_key_returns_the_same_task_and_inserts_nothing(store: Store) -> None:
    first = await store.submit_task(new_task("wf", {"v": 1}, key="order-42"))
    again = await store.submit_task(new_task("wf", {"v": 2}, key="order-42"))

    assert again.task_id == first.task_id
    assert (first.created, again.created) == (True, False)
    tasks = await store.list_tasks()
    assert [t.id for t in tasks] == [first.task_id]
    assert tasks[0].input == {"v": 1}
    assert [e.kind for e in await store.task_events(first.task_id)] == ["received"]


async def test_concurrent_submits_of_one_key_make_one_task(store: Store) -> None:
    outcomes = await asyncio.gather(
        *(store.submit_task(new_task("wf", {"i": i}, key="k")) for i in range(20))
    )

    assert len({o.task_id for o in outcomes}) == 1
    assert sum(o.created for o in outcomes) == 1
    assert len(await store.list_tasks()) == 1


async def test_keys_are_unique_per_workflow(store: Store) -> None:
    a = await store.submit_task(new_task("wf-a", key="k"))
    b = await store.submit_task(new_task("wf-b", key="k"))
    c = await store.submit_task(new_task("wf-a"))
    d = await store.submit_task(new_task("wf-a"))

    assert len({a.task_id, b.task_id, c.task_id, d.task_id}) == 4


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param("x" * (1024 * 1024 + 1), id="over-1MiB"),
        pytest.param(float("nan"), id="NaN"),
        pytest.param(_nested(100), id="nested-100"),
        pytest.param(_nested(5000), id="nested-5000"),
        pytest.param({1, 2}, id="set"),
        pytest.param("nul\x00", id="NUL"),
    ],
)
async def test_a_bad_payload_is_refused_and_writes_nothing(store: Store, payload: object) -> None:
    with pytest.raises(PayloadError):
        await store.submit_task(new_task("wf", payload))

    assert await store.list_tasks() == []
    assert await store.read_events(reply_to=None, after_id=0) == []
