"""Heartbeats (`extend_step`) and done keys (`begin_once`, `finish_once`, `abandon_once`).

A heartbeat moves the step's, the request's and the task's deadlines, but only
for the current execution of a running step: a superseded one gets None and
changes nothing. A done key is marked `started` (committed, visible to every
other connection) before its effect runs; the operator's retry of a step clears
its `started` marks, never its `done` ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState
from shepherd.errors import PayloadError
from shepherd.store.contract import REPLY_GRACE
from support.factories import claimed_task, snapshot, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import Request, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

WITHIN = 10.0


async def running_step(store: Store, *, seq: int = 1) -> tuple[Task, Request]:
    """A claimed task whose step `seq` runs, its request taken by worker w1."""
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=seq, agent="a", within=WITHIN))
    return task, await taken_request(store, agent="a", worker="w1")


# -- heartbeats -------------------------------------------------------------------------
async def test_a_heartbeat_moves_the_step_request_and_task_deadlines(
    store: Store, fake_clock: FakeClock
) -> None:
    task, request = await running_step(store)
    fake_clock.advance(4.0)

    extended = await store.extend_step(request, worker="w1")

    assert extended == store.now() + timedelta(seconds=WITHIN)
    after = await store.get_task(task.id)
    assert after is not None
    assert after.steps[0].complete_by == extended
    assert after.complete_by == extended + timedelta(seconds=REPLY_GRACE)
    # Past the old deadline, before the new one: nothing has expired.
    fake_clock.advance(WITHIN - 2.0)
    assert request.complete_by < store.now() < extended
    assert task.id not in [t.id for t in await store.expired_claims(limit=100)]
    assert await store.take_requests(agents=["a"], worker="w2", limit=10) == []
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"done": 1})


async def test_without_a_heartbeat_the_same_step_expires(
    store: Store, fake_clock: FakeClock
) -> None:
    task, request = await running_step(store)
    fake_clock.advance(WITHIN + REPLY_GRACE + 0.1)

    assert task.id in [t.id for t in await store.expired_claims(limit=100)]
    assert not await store.reply_and_ack(request, worker="w1", ok=True, body={"done": 1})


async def _superseded_attempt(store: Store, task: Task, request: Request) -> Request:
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2, within=WITHIN))
    return request


async def _moved_epoch(store: Store, task: Task, request: Request) -> Request:
    await store.release_tasks([task.id], locked_by="s1")
    (again,) = await store.claim_tasks(locked_by="s2", limit=10)
    await store.start_step(step_start(again, seq=1, agent="a", attempt=2, within=WITHIN))
    await taken_request(store, agent="a", worker="w1")
    return request


async def _forged_epoch(store: Store, task: Task, request: Request) -> Request:
    return replace(request, lock_epoch=request.lock_epoch + 1)


async def _forged_attempt(store: Store, task: Task, request: Request) -> Request:
    return replace(request, attempt=request.attempt + 1)


async def _replied(store: Store, task: Task, request: Request) -> Request:
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"done": 1})
    return request


#: How an execution gets superseded: (store, task, its request) -> the request it heartbeats with.
SUPERSEDED: dict[str, Callable[[Store, Task, Request], Awaitable[Request]]] = {
    "superseded_attempt": _superseded_attempt,
    "moved_epoch": _moved_epoch,
    "forged_epoch": _forged_epoch,
    "forged_attempt": _forged_attempt,
    "already_replied": _replied,
}


@pytest.mark.parametrize("how", sorted(SUPERSEDED))
async def test_a_heartbeat_of_a_superseded_execution_changes_nothing(
    store: Store, fake_clock: FakeClock, how: str
) -> None:
    task, request = await running_step(store)
    stale = await SUPERSEDED[how](store, task, request)
    fake_clock.advance(1.0)
    before = await snapshot(store, task.id)

    assert await store.extend_step(stale, worker="w1") is None

    assert await snapshot(store, task.id) == before


async def test_a_heartbeat_by_another_worker_or_past_complete_by_changes_nothing(
    store: Store, fake_clock: FakeClock
) -> None:
    task, request = await running_step(store)
    before = await snapshot(store, task.id)

    assert await store.extend_step(request, worker="w2") is None
    assert await snapshot(store, task.id) == before

    fake_clock.advance(WITHIN + 0.1)
    assert await store.extend_step(request, worker="w1") is None
    assert await snapshot(store, task.id) == before


async def test_a_heartbeat_never_shortens_the_tasks_claim(
    store: Store, fake_clock: FakeClock
) -> None:
    task, first = await running_step(store)
    await store.start_step(step_start(task, seq=2, agent="b", within=100.0))
    claim = (await store.get_task(task.id)).complete_by  # type: ignore[union-attr]

    assert await store.extend_step(first, worker="w1") is not None

    assert (await store.get_task(task.id)).complete_by == claim  # type: ignore[union-attr]


# -- done keys --------------------------------------------------------------------------
async def test_a_key_is_new_then_started_then_done_with_its_result(stores: Stores) -> None:
    store = await stores.connect()
    other = await stores.connect()  # another process's connection

    assert await store.begin_once("t/1", holder="h1") == ("new", None)
    # Committed before the effect runs: another connection sees the mark.
    assert await other.begin_once("t/1", holder="h2") == ("started", None)
    assert not await other.finish_once("t/1", holder="h2", result={"charge": 2})
    assert not await other.abandon_once("t/1", holder="h2")

    assert await store.finish_once("t/1", holder="h1", result={"charge": 1})

    assert await other.begin_once("t/1", holder="h2") == ("done", {"charge": 1})
    assert not await store.abandon_once("t/1", holder="h1"), "a done mark is never removed"
    assert await store.begin_once("t/1", holder="h3") == ("done", {"charge": 1})


async def test_an_abandoned_key_is_new_again(store: Store) -> None:
    assert await store.begin_once("t/1/charge", holder="h1") == ("new", None)

    assert await store.abandon_once("t/1/charge", holder="h1")

    assert await store.begin_once("t/1/charge", holder="h2") == ("new", None)


async def test_a_result_that_is_not_json_is_refused_and_the_mark_stays_started(
    store: Store,
) -> None:
    assert await store.begin_once("t/1", holder="h1") == ("new", None)

    with pytest.raises(PayloadError):
        await store.finish_once("t/1", holder="h1", result=float("nan"))

    assert await store.begin_once("t/1", holder="h2") == ("started", None)


async def test_retrying_a_step_clears_its_started_marks_only(store: Store) -> None:
    task, request = await running_step(store)
    assert await store.reply_and_ack(request, worker="w1", ok=False, body={"message": "?"})
    await store.record_replies(locked_by="s1", limit=10)
    await store.fail_task(
        task.id, locked_by="s1", epoch=task.lock_epoch, state=ProcessState.ERROR, error={"r": 1}
    )
    marks = {
        f"{task.id}/1": "started",
        f"{task.id}/1/charge": "started",
        f"{task.id}/1/mail": "done",
        f"{task.id}/2": "started",
        f"{task.id}/10": "started",
        f"{task.id}/10/charge": "started",
    }
    for key, state in marks.items():
        assert await store.begin_once(key, holder="old") == ("new", None)
        if state == "done":
            assert await store.finish_once(key, holder="old", result={"key": key})

    await store.retry_task(task.id, seq=1)

    seen = {key: (await store.begin_once(key, holder="new"))[0] for key in marks}
    assert seen == {
        f"{task.id}/1": "new",
        f"{task.id}/1/charge": "new",
        f"{task.id}/1/mail": "done",
        f"{task.id}/2": "started",
        f"{task.id}/10": "started",
        f"{task.id}/10/charge": "started",
    }
