"""Deadlines, retries and escalation on a FakeClock: the roles wait on the app's clock.

The app and its store read and wait on one `FakeClock`, so a 32-second step
window or a 20-second backoff passes when the test moves the clock, not in
real time. While the clock stands still only work that needs no time happens
(a submit, a claim, a step sent to its agent, a reply); `advance_until` moves
the clock one wake-up at a time when a chain of timers must run (a deadline,
then the supervisor's next scan, then a backoff) and stops as soon as the
outcome shows. Each test runs on SQLite and on PostgreSQL (`store_url`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    App,
    BackoffPolicy,
    ProcessState,
    RetryPolicy,
    TransientError,
    WorkflowContext,
)
from shepherd.testing import FakeClock, advance_until, wait_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

    from shepherd import Alert
    from shepherd.core.records import JsonValue

#: The step window: long beside every periodic wake-up, so that no move of the
#: clock can pass it before the step has reached its agent.
WINDOW = 32.0
#: The most fake seconds one move of the clock goes on (see `advance_until`).
STEP = 1.0
#: Real seconds a test waits for an outcome before it fails (a backstop).
PATIENCE = 15.0


@pytest.fixture
async def app(store_url: str, alerts: list[Alert], fake_clock: FakeClock) -> AsyncIterator[App]:
    """A fresh app whose roles and store run on the test's FakeClock."""
    app = App(
        store_url,
        alerts=[alerts.append],
        clock=fake_clock,
        supervisor_interval=1.0,
        poll_interval=1.0,
        lease_ttl=3.0,
        # advance_until moves the clock on every 10 ms of real time, also while a
        # beat's write is in flight: under a loaded machine the clock can run two
        # 1 s beats ahead of one write, and the process would look frozen. (7 s:
        # no wake-up the tests look for.)
        worker_beat=7.0,
        worker_ttl=30.0,
        sqlite_synchronous="NORMAL",
    )
    try:
        yield app
    finally:
        await app.close()


def task_is(app: App, task_id: str, check: Callable[[Any], bool]) -> Callable[[], Awaitable[bool]]:
    """A predicate over the stored task, for `advance_until`."""

    async def predicate() -> bool:
        return check(await app.get_task(task_id))

    return predicate


async def kinds(app: App, task_id: str) -> list[str]:
    return [e.kind for e in await app.history(task_id)]


async def has_event(app: App, task_id: str, kind: str) -> bool:
    return kind in await kinds(app, task_id)


async def turns(n: int = 5) -> None:
    """Let the tasks the clock woke take their turn (an ordering step, not a delay)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_the_agent_gives_a_step_up_exactly_at_complete_by(
    app: App, fake_clock: FakeClock
) -> None:
    cancelled_at: list[float] = []
    entered = asyncio.Event()

    @app.agent("stuck")
    async def stuck(request: AgentRequest) -> JsonValue:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_at.append(fake_clock.monotonic())
            raise
        return None  # pragma: no cover

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("stuck", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow", {})
        await asyncio.wait_for(entered.wait(), PATIENCE)  # the clock stands still meanwhile
        fake_clock.advance(WINDOW - 0.5)
        await turns()
        assert cancelled_at == []

        fake_clock.advance(0.5)
        await wait_until(lambda: bool(cancelled_at), timeout=PATIENCE)
        await wait_until(
            lambda: has_event(app, task_id, "step_timed_out"),
            timeout=PATIENCE,
            message="the agent left no step_timed_out in the history",
        )

    assert cancelled_at == [WINDOW]


async def test_a_heartbeat_moves_the_agents_deadline(app: App, fake_clock: FakeClock) -> None:
    cancelled_at: list[float] = []
    entered, beat, beaten = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @app.agent("slow")
    async def slow(request: AgentRequest) -> JsonValue:
        entered.set()
        await beat.wait()
        await request.heartbeat()
        beaten.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_at.append(fake_clock.monotonic())
            raise
        return None  # pragma: no cover

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("slow", data, within=WINDOW)

    async with app.running():
        await app.submit("flow", {})
        await asyncio.wait_for(entered.wait(), PATIENCE)
        fake_clock.advance(16)
        beat.set()  # complete_by moves to 16 + WINDOW
        await asyncio.wait_for(beaten.wait(), PATIENCE)

        fake_clock.advance(WINDOW - 0.5)  # past the first complete_by
        await turns()
        assert cancelled_at == []

        fake_clock.advance(0.5)
        await wait_until(lambda: bool(cancelled_at), timeout=PATIENCE)

    assert cancelled_at == [16 + WINDOW]


async def test_a_step_never_answered_is_retried_then_escalated(
    app: App, fake_clock: FakeClock, alerts: list[Alert]
) -> None:
    attempts: list[int] = []

    @app.agent("stuck")
    async def stuck(request: AgentRequest) -> JsonValue:
        attempts.append(request.attempt)
        await asyncio.Event().wait()
        return None  # pragma: no cover

    @app.workflow("flow", max_failures=2, backoff=BackoffPolicy(initial=20.0, jitter=0.0))
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("stuck", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow", {}, key="k-1")
        await wait_until(lambda: attempts == [1], timeout=PATIENCE)
        # complete_by passes: the agent gives up, the supervisor's next scan resets the task.
        await advance_until(
            fake_clock, task_is(app, task_id, lambda t: t.failure_count >= 1), step=STEP
        )
        reset = await app.get_task(task_id)
        # The backoff passes, a scheduler claims the task again, the step runs again.
        await advance_until(fake_clock, lambda: len(attempts) == 2, step=STEP)
        await advance_until(
            fake_clock,
            task_is(app, task_id, lambda t: t.process_state is ProcessState.ERROR),
            step=STEP,
        )
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert reset.failure_count == 1
    assert reset.not_before is not None
    task = await app.get_task(task_id)
    assert attempts == [1, 2]
    assert task.failure_count == 2
    assert "complete_by expired 2 times" in task.error["reason"]
    assert "step 1 (stuck) was cancelled at complete_by" in task.error["reason"]
    history = await kinds(app, task_id)
    assert history.count("reset") == 1
    assert history.count("step_timed_out") == 2
    (alert,) = alerts
    assert (alert.task_id, alert.key, alert.failure_count) == (task_id, "k-1", 2)


async def test_a_transient_failure_is_retried_after_its_backoff_sleep(
    app: App, fake_clock: FakeClock
) -> None:
    tries: list[int] = []

    @app.agent("flaky", retry=RetryPolicy(initial_delay=10.0, max_delay=10.0, jitter=False))
    async def flaky(request: AgentRequest) -> JsonValue:
        tries.append(request.retry)
        if request.retry == 0:
            raise TransientError("the service is busy")
        return {"ok": True}

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data, within=60.0)

    async with app.running():
        task_id = await app.submit("flow", {})
        # The agent sleeps its backoff on the clock: 10 s that only a move can end.
        await wait_until(
            lambda: 10.0 in fake_clock.wakeups(),
            timeout=PATIENCE,
            message=f"no backoff sleep of 10 s among {fake_clock.wakeups()}",
        )
        fake_clock.advance(9.5)
        await turns()
        assert tries == [0]

        fake_clock.advance(0.5)
        assert await app.result(task_id, timeout=PATIENCE) == {"ok": True}

    task = await app.get_task(task_id)
    assert tries == [0, 1]
    assert task.failure_count == 0
    assert [s.attempt for s in task.steps] == [1]
    assert fake_clock.monotonic() == 10.0
