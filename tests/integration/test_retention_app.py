"""Retention through the App: the supervisor's leader purges on schedule, a purged task says so.

The schedule tests run the App on a FakeClock: tasks are made at chosen
instants through the store, the clock is moved past `retention`, and the
supervisor role (real, in the background) is polled with a deadline until it
has purged. Nothing waits on the real clock for a retention window.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from shepherd import App, WorkflowContext
from shepherd.assembly import Assembly
from shepherd.core.records import JsonValue
from shepherd.core.states import ProcessState
from shepherd.errors import UnknownTaskError
from shepherd.testing import FakeClock, wait_until
from support.factories import claimed_task, submitted_task

RETENTION = 3600.0
KEY_RETENTION = 7200.0


@pytest.fixture
async def timed_app(store_url: str) -> AsyncIterator[tuple[App, FakeClock]]:
    """An app on a FakeClock with a one-hour retention, its keys kept two hours."""
    clock = FakeClock()
    app = App(
        store_url,
        alerts=(),
        clock=clock,
        supervisor_interval=0.05,
        poll_interval=0.05,
        lease_ttl=1.0,
        sqlite_synchronous="NORMAL",
        retention=RETENTION,
        key_retention=KEY_RETENTION,
        purge_batch=2,
    )

    @app.workflow("wf")  # the store factories' workflow
    async def wf(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return None

    await app.open()
    try:
        yield app, clock
    finally:
        await app.close()


async def _ended(app: App, state: ProcessState, *, key: str | None = None) -> str:
    """A task its owner ended in `state`, now (on the app's clock)."""
    task = await claimed_task(app.store, locked_by="s1", key=key)
    if state is ProcessState.PROCESSED:
        await app.store.finish_task(
            task.id, locked_by="s1", epoch=task.lock_epoch, result={"ok": 1}
        )
    else:
        await app.store.fail_task(
            task.id, locked_by="s1", epoch=task.lock_epoch, state=state, error={"reason": "x"}
        )
    return task.id


async def _gone(app: App, task_id: str) -> bool:
    return await app.store.get_task(task_id) is None


async def test_the_supervisors_leader_purges_ended_tasks_past_retention_and_then_their_keys(
    timed_app: tuple[App, FakeClock], caplog: pytest.LogCaptureFixture
) -> None:
    app, clock = timed_app
    old = [await _ended(app, ProcessState.PROCESSED, key=f"order-{n}") for n in range(5)]
    error = await _ended(app, ProcessState.ERROR, key="order-e")
    running = (await claimed_task(app.store, locked_by="elsewhere:1:aa/s")).id
    clock.advance(RETENTION - 60)
    recent = await _ended(app, ProcessState.CANCELLED)
    pending = (await submitted_task(app.store)).id
    clock.advance(61)  # the first five are past retention, by a second
    caplog.set_level(logging.INFO, logger="shepherd.supervisor")

    async with app.running(["supervisor"]):
        # Five tasks, two per batch: three batches in one pass.
        for task_id in old:
            await wait_until(
                functools.partial(_gone, app, task_id), timeout=20, message="not purged"
            )
        await wait_until(
            lambda: "retention: purged 5 tasks" in caplog.text, timeout=20, message="no log line"
        )
        for task_id in (error, running, recent, pending):
            assert await app.store.get_task(task_id) is not None
        assert await app.submit("wf", key="order-0") == old[0]  # the key still answers

        clock.advance(KEY_RETENTION + 1)  # past the keys' retention, and past a purge interval
        await wait_until(
            lambda: _no_tombstone(app, old[0]), timeout=20, message="the tombstone stayed"
        )

    fresh = await app.submit("wf", key="order-0")
    assert fresh != old[0]
    assert (await app.get_task(fresh)).process_state is ProcessState.PENDING
    # An hour and more after it ended, the recent one went too; error never goes.
    assert await _gone(app, recent)
    assert not await _gone(app, error)


async def _no_tombstone(app: App, task_id: str) -> bool:
    return await app.store.get_tombstone(task_id) is None


async def test_a_purge_pass_runs_only_when_leading_and_once_per_interval(store_url: str) -> None:
    clock = FakeClock()
    app = App(
        store_url,
        alerts=(),
        clock=clock,
        sqlite_synchronous="NORMAL",
        retention=10.0,
        purge_interval=60.0,
    )
    async with app:
        supervisor = Assembly(app).supervisor(holder="v1")
        first = await _ended(app, ProcessState.COMPENSATED)
        clock.advance(11)

        assert await supervisor.purge_once() == 0  # not leading: nothing happens
        assert not await _gone(app, first)
        assert await supervisor.renew() is not None
        assert await supervisor.purge_once() == 1  # the first pass runs at once
        second = await _ended(app, ProcessState.COMPENSATED)
        clock.advance(11)  # past retention, within the interval
        assert await supervisor.purge_once() == 0
        assert not await _gone(app, second)
        clock.advance(49)  # 60 s since the last pass
        assert await supervisor.purge_once() == 1
        assert await _gone(app, second)
        assert supervisor.purged == 2


@pytest.mark.parametrize("keyed", [True, False])
async def test_the_result_of_a_purged_task_says_it_ended_and_was_purged(
    app: App, keyed: bool
) -> None:
    @app.agent("greet")
    async def greet(request: object) -> JsonValue:
        return "hello"

    @app.workflow("hello")
    async def hello(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return await ctx.call("greet")

    key = "order-1" if keyed else None
    async with app.running():
        task_id = await app.submit("hello", key=key)
        assert await app.result(task_id, timeout=30) == "hello"
    await app.store.purge_tasks(ended_before=app.store.now() + timedelta(seconds=1), limit=10)

    for call in (app.result(task_id), app.get_task(task_id)):
        with pytest.raises(UnknownTaskError) as caught:
            await call
        assert caught.value.task_id == task_id
        if keyed:
            assert "ended processed and was purged at" in caught.value.message
            assert caught.value.process_state == "processed"
            assert caught.value.purged_at is not None
        else:  # without a key nothing remains to tell
            assert caught.value.message == f"unknown task {task_id!r}"
            assert caught.value.purged_at is None
    if keyed:
        assert await app.submit("hello", key="order-1") == task_id
        assert await app.list_tasks() == []


async def test_a_pass_that_left_tasks_behind_is_followed_by_another_at_once(
    timed_app: tuple[App, FakeClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, clock = timed_app  # two tasks per batch
    monkeypatch.setattr("shepherd.supervisor.supervisor.PURGE_BATCHES", 2)
    ids = [await _ended(app, ProcessState.CANCELLED) for _ in range(5)]
    clock.advance(RETENTION + 1)
    supervisor = Assembly(app).supervisor(holder="v1")
    assert await supervisor.renew() is not None

    assert await supervisor.purge_once() == 4  # two full batches: the budget is spent
    assert await supervisor.purge_once() == 1  # the next scan goes on, not a minute later
    assert await supervisor.purge_once() == 0  # nothing is left
    assert [t for t in ids if not await _gone(app, t)] == []
