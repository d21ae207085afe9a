"""A step's start and its reply move the task's claim ahead, and nothing else of its row.

A touch writes `complete_by` only (migration 0032): `updated_at` is moved by
changes of state and of claim (a claim, an end), never by a step's progress,
so that no index of `tasks` is written by a touch (a HOT update on PostgreSQL,
`tests/postgres/test_hot_touches.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from support.factories import claimed_task, step_start

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def _stored(store: Store, task: Task) -> Task:
    stored = await store.get_task(task.id)
    assert stored is not None
    return stored


async def test_a_steps_start_and_reply_move_the_claim_not_updated_at(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store)
    claimed = await _stored(store, task)
    assert claimed.updated_at == fake_clock.now()  # the claim moved it

    fake_clock.advance(5.0)
    await store.start_step(step_start(task, seq=1, within=30.0))
    started = await _stored(store, task)
    assert started.complete_by is not None
    assert claimed.complete_by is not None
    assert started.complete_by > claimed.complete_by
    assert started.updated_at == claimed.updated_at

    fake_clock.advance(5.0)
    (request,) = await store.take_requests(agents=["a"], worker="w1", limit=10)
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"r": 1})
    assert len(await store.record_replies(locked_by="s1", limit=10)) == 1
    replied = await _stored(store, task)
    assert replied.complete_by is not None
    assert replied.complete_by != started.complete_by
    assert replied.updated_at == claimed.updated_at

    fake_clock.advance(5.0)
    await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=None)
    ended = await _stored(store, task)
    assert ended.process_state is ProcessState.PROCESSED
    assert ended.updated_at == fake_clock.now()  # an end moves it
