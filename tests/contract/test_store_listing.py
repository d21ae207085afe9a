"""Listing tasks: newest first, at most `limit`, only those matching every filter given."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def _ids(store: Store, **filters: object) -> list[str]:
    return [task.id for task in await store.list_tasks(**filters)]  # type: ignore[arg-type]


async def test_filters_by_workflow_key_and_state_together(
    store: Store, fake_clock: FakeClock
) -> None:
    made = []
    for workflow, key in (("wf-a", "k1"), ("wf-b", "k1"), ("wf-a", "k2")):
        made.append((await store.submit_task(new_task(workflow, key=key))).task_id)
        fake_clock.advance(1)
    a1, b1, a2 = made
    (claimed,) = await store.claim_tasks(locked_by="s1", limit=1)

    assert await _ids(store) == [a2, b1, a1]
    assert await _ids(store, workflow="wf-a") == [a2, a1]
    assert await _ids(store, key="k1") == [b1, a1]
    assert await _ids(store, key="k1", workflow="wf-b") == [b1]
    assert await _ids(store, workflow="wf-a", states=[ProcessState.PENDING]) == [
        t for t in (a2, a1) if t != claimed.id
    ]
    assert await _ids(store, workflow="nope") == []
    assert await _ids(store, key="k1", limit=1) == [b1]


async def test_filters_by_id_prefix(store: Store) -> None:
    ids = [(await store.submit_task(new_task("wf"))).task_id for _ in range(3)]
    target = ids[1]

    assert await _ids(store, id_prefix=target) == [target]
    assert await _ids(store, id_prefix=target[:-1] + "g") == []  # ids are hex
    shared = [task_id for task_id in ids if task_id.startswith(target[:4])]
    assert await _ids(store, id_prefix=target[:4]) == sorted(shared, reverse=True)
    assert await _ids(store, id_prefix="") == await _ids(store)


async def test_filters_by_last_change(store: Store, fake_clock: FakeClock) -> None:
    old = (await store.submit_task(new_task("wf"))).task_id
    fake_clock.advance(60)
    start = fake_clock.now()
    new = (await store.submit_task(new_task("wf"))).task_id

    assert await _ids(store, updated_since=start) == [new]
    assert await _ids(store, updated_since=start - timedelta(seconds=61)) == [new, old]
    fake_clock.advance(60)
    # A change moves a task into the window.
    (claimed,) = await store.claim_tasks(locked_by="s1", limit=1)
    assert claimed.id == old
    assert await _ids(store, updated_since=fake_clock.now()) == [old]
