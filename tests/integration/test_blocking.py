"""Blocking code, on both backends: the watchdog names it while it blocks; `threads=True` runs it aside.

A handler (or workflow) that blocks the event loop stops every role of its
process. The watchdog must say so *while* it happens: the blocking handlers
below block the loop exactly until the watchdog's warning naming them arrives
(`LogWatch.wait_for`), and return whether it did. A `threads=True` handler runs
in a thread of its own: the loop stays free, and the thread keeps its slot until
it returns, past its step's deadline too (on a FakeClock the test moves: the
watchdog measures the real loop, but a step's window is the app's clock's).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from shepherd import AgentRequest, Alert, App, TransientError, WorkflowContext
from shepherd.core.records import JsonValue
from shepherd.testing import FakeClock, wait_until
from support.fake_time import PERIODS, WINDOW, pass_until
from support.logs import LogWatch

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
#: The watchdog's threshold in these tests, in seconds.
BLOCK = 0.2
#: A step window no test reaches, in seconds.
LONG = 60.0


@pytest.fixture
async def make_app(store_url: str, alerts: list[Alert]) -> AsyncIterator[Callable[..., App]]:
    """Apps on the test's store, with the integration suite's short windows plus `settings`.

    Given a `clock` (a FakeClock), the app runs on it, with the periods of support.fake_time.
    """
    made: list[App] = []

    def make(*, clock: FakeClock | None = None, **settings: Any) -> App:
        periods: dict[str, Any] = (
            {"supervisor_interval": 0.1, "poll_interval": 0.05, "lease_ttl": 1.0}
            if clock is None
            else PERIODS
        )
        app = App(
            store_url,
            alerts=[alerts.append],
            clock=clock,
            sqlite_synchronous="NORMAL",
            **periods,
            **settings,
        )
        made.append(app)
        return app

    yield make
    for app in made:
        await app.close()


def blocked_by(**culprit: object) -> Callable[[logging.LogRecord], bool]:
    """Matches the watchdog's warning whose culprit has these fields."""

    def match(record: logging.LogRecord) -> bool:
        found = getattr(record, "culprit", None)
        return record.levelno == logging.WARNING and all(
            getattr(found, k, None) == v for k, v in culprit.items()
        )

    return match


def unblocked(record: logging.LogRecord) -> bool:
    return record.levelno == logging.INFO and "event loop unblocked after" in record.getMessage()


# -- the watchdog ------------------------------------------------------------------------
async def test_a_handler_blocking_the_loop_is_named_while_it_blocks(
    make_app: Callable[..., App],
) -> None:
    app = make_app(block_warning=BLOCK)
    with LogWatch("shepherd.watchdog") as watch:

        @app.agent("stuck")
        async def stuck(request: AgentRequest) -> JsonValue:
            # No await: this blocks the event loop until the warning naming it arrives.
            return watch.wait_for(blocked_by(agent="stuck"), timeout=PATIENCE) is not None

        @app.workflow("flow")
        async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
            return await ctx.call("stuck", data, within=LONG)

        async with app.running():
            await wait_until(lambda: app.watchdog.running, timeout=PATIENCE)
            task_id = await app.submit("flow")
            arrived = await app.result(task_id, timeout=PATIENCE * 2)
            assert arrived is True, "no warning arrived while the loop was blocked"
            await wait_until(
                lambda: bool(watch.matching(unblocked)),
                timeout=PATIENCE,
                message="no unblocked line",
            )
        assert not app.watchdog.running, "the watchdog outlived App.run"

    (warning,) = watch.matching(blocked_by(agent="stuck"))
    assert warning.threadName == "shepherd-watchdog"
    culprit = warning.culprit  # type: ignore[attr-defined]
    assert (culprit.agent, culprit.task_id, culprit.seq) == ("stuck", task_id, 1)
    message = warning.getMessage()
    assert f"by agent 'stuck' (task {task_id}, step 1)" in message
    assert f"block_warning is {BLOCK:g} s" in message
    # The line it is stuck on: the innermost application frame (the log watch's wait).
    assert "logs.py" in message
    assert "in wait_for" in message
    after = [r for r in watch.matching(unblocked) if r.culprit.agent == "stuck"]  # type: ignore[attr-defined]
    assert len(after) == 1
    assert f"blocked by agent 'stuck' (task {task_id}, step 1)" in after[0].getMessage()
    assert after[0].blocked_for >= BLOCK  # type: ignore[attr-defined]
    statistics = app.watchdog.statistics()
    assert statistics.episodes >= 1
    assert statistics.longest_block >= BLOCK
    assert app.metrics.value("loop_blocks") == statistics.episodes


async def test_a_workflow_blocking_the_loop_is_named_while_it_blocks(
    make_app: Callable[..., App],
) -> None:
    app = make_app(block_warning=BLOCK)
    with LogWatch("shepherd.watchdog") as watch:

        @app.workflow("crunch")
        async def crunch(ctx: WorkflowContext, data: Any) -> JsonValue:
            return watch.wait_for(blocked_by(workflow="crunch"), timeout=PATIENCE) is not None

        async with app.running():
            task_id = await app.submit("crunch")
            arrived = await app.result(task_id, timeout=PATIENCE * 2)
            assert arrived is True, "no warning arrived while the loop was blocked"

    (warning,) = watch.matching(blocked_by(workflow="crunch"))
    assert warning.culprit.task_id == task_id  # type: ignore[attr-defined]
    assert f"by workflow 'crunch' (task {task_id})" in warning.getMessage()
    assert "a workflow must not block" in warning.getMessage()


# -- threads=True ---------------------------------------------------------------------------
async def test_threaded_handlers_block_together_while_the_loop_runs_on(
    make_app: Callable[..., App],
) -> None:
    app = make_app(block_warning=BLOCK)
    release = threading.Event()
    entered: list[str] = []

    legacy_and_quick(app, entered, release, result=None)

    with LogWatch("shepherd.watchdog") as watch:
        async with app.running():
            held = [await app.submit("old", n) for n in range(20)]
            await wait_until(
                lambda: len(entered) == 20, timeout=PATIENCE, message="not all 20 ran at once"
            )
            # All twenty block at once, and the loop still runs another agent's step.
            quick_id = await app.submit("new")
            assert await app.result(quick_id, timeout=PATIENCE) == "quick"
            assert not release.is_set()

            release.set()
            assert [await app.result(t, timeout=PATIENCE) for t in held] == list(range(20))

    assert sorted(entered) == sorted(held)
    assert not watch.matching(blocked_by(agent="legacy")), "a threaded handler blocked the loop"


async def test_a_worker_runs_at_most_agent_threads_blocking_handlers(
    make_app: Callable[..., App],
) -> None:
    app = make_app(agent_threads=2)
    release = threading.Event()
    entered: list[str] = []

    legacy_and_quick(app, entered, release, result="done")

    async with app.running():
        held = [await app.submit("old", n) for n in range(5)]
        await wait_until(lambda: len(entered) == 2, timeout=PATIENCE)
        # The worker goes on taking other agents' requests, but no third blocking one.
        for _ in range(3):
            assert await app.result(await app.submit("new"), timeout=PATIENCE) == "quick"
        assert len(entered) == 2

        release.set()
        assert [await app.result(t, timeout=PATIENCE) for t in held] == ["done"] * 5

    assert sorted(entered) == sorted(held)


async def test_a_thread_past_its_deadline_keeps_its_slot_until_it_returns(
    make_app: Callable[..., App], fake_clock: FakeClock
) -> None:
    app = make_app(agent_concurrency=1, clock=fake_clock)
    release = threading.Event()
    #: (task, attempt, whether the first thread had been released) of each execution.
    entered: list[tuple[str, int, bool]] = []

    @app.agent("legacy", threads=True, within=WINDOW)
    def legacy(request: AgentRequest) -> JsonValue:
        entered.append((request.task_id, request.attempt, release.is_set()))
        if len(entered) == 1:
            release.wait(PATIENCE)  # hangs far past complete_by
        return "done"

    @app.workflow("old", max_failures=100)
    async def old(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("legacy", data)

    def overdue(record: logging.LogRecord) -> bool:
        return record.levelno == logging.WARNING and "still running at complete_by" in (
            record.getMessage()
        )

    with LogWatch("shepherd.agent") as watch:
        async with app.running():
            first = await app.submit("old", 1)
            await wait_until(lambda: len(entered) == 1, timeout=PATIENCE)
            second = await app.submit("old", 2)
            await pass_until(app, lambda: bool(watch.matching(overdue)))
            # The first task was given up and its step sent again; the second one's
            # request waits too. Neither is taken: the only slot is the thread's.
            await pass_until(app, lambda: reset(app, first))
            await wait_until(lambda: step_sent(app, second), timeout=PATIENCE)
            assert len(entered) == 1

            release.set()
            await pass_until(app, lambda: processed(app, first, second))
            assert await app.result(first, timeout=PATIENCE) == "done"
            assert await app.result(second, timeout=PATIENCE) == "done"
            await wait_until(lambda: bool(watch.matching(returned)), timeout=PATIENCE)

    assert entered[0] == (first, 1, False)
    assert all(released for _, _, released in entered[1:]), entered
    (warning,) = watch.matching(overdue)
    assert warning.getMessage().startswith(f"legacy {first}/1: handler thread still running")
    assert "keeps its slot until it returns" in warning.getMessage()
    (back,) = watch.matching(returned)
    assert back.getMessage().startswith(f"legacy {first}/1: handler thread returned")
    assert app.metrics.value("threads_overdue", agent="legacy") == 1
    assert app.metrics.value("timeouts", agent="legacy") >= 1


def returned(record: logging.LogRecord) -> bool:
    return "handler thread returned" in record.getMessage()


async def reset(app: App, task_id: str) -> bool:
    return any(e.kind == "reset" for e in await app.history(task_id))


async def step_sent(app: App, task_id: str) -> bool:
    return bool((await app.get_task(task_id)).steps)


async def processed(app: App, *task_ids: str) -> bool:
    return all([(await app.get_task(t)).process_state.value == "processed" for t in task_ids])


async def test_a_threaded_handlers_failures_are_retried_and_replied_like_any(
    make_app: Callable[..., App],
) -> None:
    app = make_app()
    tries: list[int] = []

    @app.agent("flaky", threads=True)
    def flaky(request: AgentRequest) -> JsonValue:
        tries.append(request.retry)
        if request.retry < 2:
            raise TransientError("the mainframe is busy")
        return {"tries": len(tries)}

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data, within=LONG)

    async with app.running():
        task_id = await app.submit("flow")
        assert await app.result(task_id, timeout=PATIENCE) == {"tries": 3}

    assert tries == [0, 1, 2]


async def test_a_threaded_handler_calling_heartbeat_fails_its_step_saying_why(
    make_app: Callable[..., App],
) -> None:
    app = make_app()

    @app.agent("legacy", threads=True)
    def legacy(request: AgentRequest) -> JsonValue:
        request.heartbeat()  # a mistake: it is async
        return None

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("legacy", data, within=LONG)

    async with app.running():
        task_id = await app.submit("flow")
        await wait_until(lambda: ended(app, task_id), timeout=PATIENCE)

    task = await app.get_task(task_id)
    # A mistake in the handler is a bug: the task waits for an operator, with the reason.
    assert task.process_state.value == "error"
    assert task.error is not None
    assert "raised RuntimeError" in task.error["reason"]
    assert "threads=True agent cannot call it" in task.error["reason"]


async def ended(app: App, task_id: str) -> bool:
    task = await app.get_task(task_id)
    return task.process_state.value in ("processed", "compensated", "cancelled", "error")


def legacy_and_quick(
    app: App, entered: list[str], release: threading.Event, *, result: JsonValue
) -> None:
    """A threaded agent `legacy` held until `release` (its result: `result`, or the
    payload when None), an async agent `quick`, and a workflow for each (old, new)."""

    @app.agent("legacy", threads=True)
    def legacy(request: AgentRequest) -> JsonValue:
        entered.append(request.task_id)
        release.wait(PATIENCE)  # blocking code: a lock, a socket, a sleep
        return request.payload if result is None else result

    @app.agent("quick")
    async def quick(request: AgentRequest) -> JsonValue:
        return "quick"

    @app.workflow("old")
    async def old(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("legacy", data, within=LONG)

    @app.workflow("new")
    async def new(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("quick", data)
