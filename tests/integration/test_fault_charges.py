"""What an expired claim costs its task when a fault, not the task, made it expire.

The supervisor runs against a real store; the claims and steps are written as a
scheduler and an agent elsewhere would write them. With `max_failures=1` a charged
task would end in `error` at once: every test asserts it is reset instead, with
`failure_count` 0 and the reason naming the fault.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import pytest

from shepherd import App, WorkflowContext
from shepherd.agents import AgentRequest
from shepherd.core.records import JsonValue, Request, Task
from shepherd.core.states import ProcessState
from shepherd.errors import StoreUnavailableError
from shepherd.outage import Outage
from shepherd.testing import wait_until
from support.factories import step_start

if TYPE_CHECKING:
    from shepherd.store.contract import Store

ELSEWHERE = "elsewhere:4242:beef"
log = logging.getLogger("test.fault_charges")


@pytest.fixture
async def app(store_url: str) -> AsyncIterator[App]:
    """A supervisor's app beating every 0.1 s: a process silent for 0.2 s froze."""
    app = App(
        store_url,
        alerts=(),
        supervisor_interval=0.05,
        poll_interval=0.05,
        lease_ttl=1.0,
        worker_beat=0.1,
        worker_ttl=30.0,
        sqlite_synchronous="NORMAL",
    )

    @app.agent("a")
    async def a(request: AgentRequest) -> JsonValue:
        return None

    @app.workflow("once", complete_within=0.2, max_failures=1)
    async def once(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return await ctx.call("a", within=0.2)

    try:
        yield app
    finally:
        await app.close()


async def claimed(app: App, owner: str) -> Task:
    """A task claimed by `owner` (its claim's window is the workflow's 0.2 s)."""
    task_id = await app.submit("once", None)
    (task,) = await app.store.claim_tasks(locked_by=owner, limit=1)
    assert task.id == task_id
    return task


async def reset_reason(app: App, task_id: str) -> str:
    """Wait for the supervisor's verdict on the task; the reason of its reset."""

    async def decided() -> bool:
        task = await app.get_task(task_id)
        return task.process_state is not ProcessState.PROCESSING

    async with app.running(["supervisor"]):
        await wait_until(decided, timeout=20, message="the supervisor never decided")
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PENDING, task.error
    assert task.failure_count == 0
    resets = [
        str(e.detail.get("reason"))
        for e in await app.history(task_id)
        if e.kind == "reset" and isinstance(e.detail, dict)
    ]
    assert len(resets) == 1
    return resets[0]


async def test_a_step_taken_by_a_frozen_process_costs_its_task_nothing(app: App) -> None:
    await app.open()
    store = app.store
    # The owner is this (live, beating) process; the step runs in a process that
    # registered and then went silent: it froze, or it is cut off.
    await store.register_worker(
        ELSEWHERE, host="elsewhere", pid=4242, roles=("agent",), agents=("a",)
    )
    task = await claimed(app, f"{app.instance}/s")
    await store.start_step(step_start(task, seq=1, agent="a", within=0.2))
    (taken,) = await store.take_requests(agents=["a"], worker=f"{ELSEWHERE}/a", limit=1)
    assert taken.task_id == task.id

    reason = await reset_reason(app, task.id)
    assert "froze" in reason
    assert "not counted as a failure" in reason
    after = await app.get_task(task.id)
    (crash,) = after.crashes  # a freeze is an episode of its own: instance@beat#seq
    assert crash.startswith(f"{ELSEWHERE}@")
    assert crash.endswith("#1")


async def test_a_step_waiting_in_probation_costs_its_task_nothing(app: App) -> None:
    await app.open()
    task = await claimed(app, f"{app.instance}/s")
    # A suspect's request that no worker takes before the claim's window passes.
    start = replace(step_start(task, seq=1, agent="a", within=0.2), suspect=True)
    await app.store.start_step(start)

    reason = await reset_reason(app, task.id)
    assert "waited in line to run apart from other suspects" in reason


async def test_a_claim_that_expired_after_another_loop_lost_the_store_is_forgiven(
    app: App,
) -> None:
    await app.open()
    # The process's scheduler failed to write, then the claim expired; the
    # supervisor's own scans never failed.
    scheduler = Outage("scheduler claims", log=log, clock=app.clock, watch=app.store.watch)
    scheduler.failed(StoreUnavailableError("disk full"))
    task = await claimed(app, f"{app.instance}/s")

    reason = await reset_reason(app, task.id)
    assert "while the store was unreachable" in reason


class HeldReplies:
    """The app's store, whose `record_replies` fails while `held` is set."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.held = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def record_replies(self, *, locked_by: str, limit: int) -> Any:
        if self.held:
            raise StoreUnavailableError("injected: replies cannot be recorded")
        return await self._store.record_replies(locked_by=locked_by, limit=limit)


async def test_a_step_recorded_after_it_was_given_up_goes_on_under_its_claim(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply written in time is recorded only after the scheduler gave its step up.

    The scheduler's reply loop could not record it before the step's window
    ended (a store fault under that loop alone), so the step was given up; once
    recorded, under the same claim (which moves its complete_by on), the
    workflow goes on from the recorded step instead of leaving the claim to
    expire with its step done.
    """
    await app.open()
    store = HeldReplies(app.store)
    app._store = cast("Store", store)  # a proxy: every other attribute is the store's
    caplog.set_level(logging.DEBUG, logger="shepherd.scheduler")
    task_id = await app.submit("once", None)

    def given_up() -> bool:
        return any("claim lost, stopping silently" in r.getMessage() for r in caplog.records)

    async def ended() -> bool:
        task = await app.get_task(task_id)
        return task.process_state is ProcessState.PROCESSED

    requests: list[Request] = []

    async def took() -> bool:
        requests.extend(await store.take_requests(agents=["a"], worker=f"{ELSEWHERE}/a", limit=1))
        return bool(requests)

    async with app.running(["scheduler"]):  # no agent here: the step waits in the queue
        await wait_until(took, timeout=20, message="the step was never queued")
        (request,) = requests
        assert await store.reply_and_ack(request, worker=f"{ELSEWHERE}/a", ok=True, body=7)
        await wait_until(given_up, timeout=20, message="the scheduler never gave the step up")
        store.held = False
        await wait_until(ended, timeout=20, message="the workflow did not go on")
    task = await app.get_task(task_id)
    assert task.failure_count == 0
    assert task.result == 7
    assert any("was recorded after it was given up" in r.getMessage() for r in caplog.records)
