"""Unexpected exceptions are bugs, and look like bugs, on both backends.

An agent handler that raises something that is neither a TransientError nor a
PermanentError (nor a known transient error) is retried like a transient
failure, logged with its traceback at every try, and, if it persists, replied
as a bug: `ctx.call` raises StepBugError (not a PermanentError), and the task
goes to `error` with an alert and the traceback, without compensation. A bug in
the workflow body does the same. The tests whose steps outlive their windows run
on a FakeClock (`fake_time`) and move it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    App,
    PermanentError,
    ProcessState,
    RetryPolicy,
    StepBugError,
    StepState,
    TaskFailedError,
    WorkflowContext,
)
from shepherd.testing import wait_until
from support import fake_time
from support.fake_time import WINDOW, has_event, pass_until

if TYPE_CHECKING:
    from shepherd import Alert
    from shepherd.core.records import JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
QUICK: dict[str, Any] = {"initial_delay": 0.001, "max_delay": 0.001}


async def ended(app: App, task_id: str) -> Task:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


def recorder(app: App, name: str, calls: list[str]) -> None:
    @app.agent(name)
    async def handler(request: AgentRequest) -> JsonValue:
        calls.append(name)
        return {"done": name}


def agent_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "shepherd.agent" and r.levelno == level]


def task_lines(caplog: pytest.LogCaptureFixture, task_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "shepherd.tasks" and r.getMessage().startswith(f"task {task_id} ")
    ]


async def test_a_handler_bug_ends_the_task_in_error_with_its_traceback_and_no_compensation(
    app: App, alerts: list[Alert], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="shepherd")
    undone: list[str] = []
    recorder(app, "reserve", [])
    recorder(app, "unreserve", undone)
    seen: list[BaseException] = []

    @app.agent("a.one", retry=RetryPolicy(max_attempts=3, **QUICK))
    async def one(request: AgentRequest) -> JsonValue:
        return {"value": request.payload["missing"]}

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        try:
            return await ctx.call("a.one", data)
        except PermanentError:  # a bug is not a refusal: this does not catch it
            return "caught as a refusal"
        except BaseException as exc:
            seen.append(exc)
            raise

    async with app.running():
        task_id = await app.submit("flow", {"present": 1}, key="order-1")
        task = await ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    assert undone == [], "a bug must not compensate the completed steps"
    (bug,) = seen
    assert isinstance(bug, StepBugError)
    assert not isinstance(bug, PermanentError)
    assert (bug.agent, bug.seq, bug.error_type, bug.tries) == ("a.one", 2, "KeyError", 3)

    reason = "step 2 (a.one) raised KeyError: 'missing' (a bug in agent 'a.one', 3 tries)"
    error = task.error
    assert error["reason"] == reason
    assert (error["type"], error["message"], error["seq"], error["agent"], error["tries"]) == (
        "KeyError",
        "'missing'",
        2,
        "a.one",
        3,
    )
    assert 'request.payload["missing"]' in error["traceback"]
    assert error["traceback"].rstrip().endswith("KeyError: 'missing'")
    (alert,) = alerts
    assert (alert.task_id, alert.key, alert.reason) == (task_id, "order-1", reason)

    step = next(s for s in task.steps if s.seq == 2)
    assert step.state is StepState.FAILED
    assert step.error is not None
    assert {k: step.error[k] for k in ("type", "message", "bug", "tries")} == {
        "type": "KeyError",
        "message": "'missing'",
        "bug": True,
        "tries": 3,
    }
    assert step.error["traceback"] == error["traceback"]

    # Every try is logged with its traceback: WARNING while retried, ERROR for the last.
    warnings = agent_records(caplog, logging.WARNING)
    (last,) = agent_records(caplog, logging.ERROR)
    assert [r.exc_info is not None and r.exc_info[0] is KeyError for r in warnings] == [True] * 2
    assert last.exc_info is not None
    assert last.exc_info[0] is KeyError
    assert f"a.one {task_id}/2 attempt 1, try 3: unexpected KeyError: 'missing'" in (
        last.getMessage()
    )
    assert "try 1: unexpected KeyError" in warnings[0].getMessage()
    assert app.metrics.value("failures", agent="a.one", kind="bug") == 3
    assert app.metrics.value("failures", agent="a.one", kind="permanent") == 0

    lines = task_lines(caplog, task_id)
    assert lines[0] == f"task {task_id} flow: claimed: lock_epoch 1, failure_count 0"
    assert f"task {task_id} flow: step 1 reserve attempt 1 completed" in lines
    assert f"task {task_id} flow: step 2 a.one attempt 1 started" in lines
    assert (
        f"task {task_id} flow: step 2 a.one attempt 1 failed: KeyError: 'missing' (a bug, 3 tries)"
        in lines
    )
    assert lines[-1] == f"task {task_id} flow: error: {reason}"


async def test_an_unexpected_error_that_passes_is_retried_and_the_task_is_processed(
    app: App, alerts: list[Alert], caplog: pytest.LogCaptureFixture
) -> None:
    tries: list[int] = []

    @app.agent("flaky", retry=RetryPolicy(max_attempts=3, **QUICK))
    async def flaky(request: AgentRequest) -> JsonValue:
        tries.append(request.retry)
        if request.retry == 0:
            raise RuntimeError("not initialised yet")
        return {"tries": len(tries)}

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data)

    async with app.running():
        task_id = await app.submit("flow")
        assert await app.result(task_id, timeout=PATIENCE) == {"tries": 2}

    assert tries == [0, 1]
    task = await app.get_task(task_id)
    assert task.failure_count == 0
    assert alerts == []
    (warning,) = agent_records(caplog, logging.WARNING)
    assert "try 1: unexpected RuntimeError: not initialised yet" in warning.getMessage()
    assert warning.exc_info is not None
    assert agent_records(caplog, logging.ERROR) == []


async def test_a_permanent_error_still_compensates(
    app: App, alerts: list[Alert], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="shepherd.tasks")
    undone: list[str] = []
    calls: list[int] = []
    recorder(app, "reserve", [])
    recorder(app, "unreserve", undone)

    @app.agent("charge", retry=RetryPolicy(max_attempts=3, **QUICK))
    async def charge(request: AgentRequest) -> JsonValue:
        calls.append(request.retry)
        raise PermanentError("card declined")

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        return await ctx.call("charge", data)

    async with app.running():
        task_id = await app.submit("flow")
        task = await ended(app, task_id)

    assert task.process_state is ProcessState.COMPENSATED
    assert task.error["reason"] == "step 2 (charge) failed permanently: card declined"
    assert calls == [0], "a refusal is not retried"
    assert undone == ["unreserve"]
    assert alerts == []
    step = next(s for s in task.steps if s.seq == 2)
    assert step.error == {"type": "PermanentError", "message": "card declined"}
    lines = task_lines(caplog, task_id)
    assert f"task {task_id} flow: compensating: {task.error['reason']}" in lines
    assert lines[-1] == f"task {task_id} flow: compensated"


async def test_a_bug_in_the_workflow_body_ends_in_error_with_its_traceback(
    app: App, alerts: list[Alert], caplog: pytest.LogCaptureFixture
) -> None:
    undone: list[str] = []
    recorder(app, "reserve", [])
    recorder(app, "unreserve", undone)

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        reserved = await ctx.call("reserve", data, undo="unreserve")
        return reserved["missing"]

    async with app.running():
        task_id = await app.submit("flow")
        task = await ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    assert undone == []
    error = task.error
    assert error["reason"] == "workflow raised KeyError: 'missing'"
    assert (error["type"], error["message"]) == ("KeyError", "'missing'")
    assert 'return reserved["missing"]' in error["traceback"]
    assert alerts[0].reason == error["reason"]
    (logged,) = [
        r for r in caplog.records if r.name == "shepherd.scheduler" and r.levelno >= logging.ERROR
    ]
    assert logged.exc_info is not None
    assert logged.exc_info[0] is KeyError
    assert f"task {task_id} flow: the workflow raised KeyError: 'missing'" == logged.getMessage()


async def test_a_threaded_handler_bug_takes_the_same_path(app: App, alerts: list[Alert]) -> None:
    @app.agent("legacy", threads=True, retry=RetryPolicy(max_attempts=2, **QUICK))
    def legacy(request: AgentRequest) -> JsonValue:
        return 1 // request.payload["divisor"]

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("legacy", data)

    async with app.running():
        task_id = await app.submit("flow", {"divisor": 0})
        task = await ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    assert task.error["reason"] == (
        "step 1 (legacy) raised ZeroDivisionError: integer division or modulo by zero "
        "(a bug in agent 'legacy', 2 tries)"
    )
    assert 'return 1 // request.payload["divisor"]' in task.error["traceback"]


@pytest.mark.fake_time
async def test_a_recorded_bug_is_raised_again_on_replay(app: App) -> None:
    seen: list[tuple[str, str, bool]] = []
    tries: list[int] = []
    stalled: list[int] = []

    @app.agent("buggy", retry=RetryPolicy(max_attempts=2, **QUICK))
    async def buggy(request: AgentRequest) -> JsonValue:
        tries.append(request.attempt)
        raise ValueError("bad state")

    @app.agent("stall")
    async def stall(request: AgentRequest) -> JsonValue:
        stalled.append(request.attempt)
        if request.attempt == 1:  # the task is claimed again, and replays step 1
            await asyncio.Event().wait()
        return {"attempt": request.attempt}

    @app.workflow("flow", max_failures=3)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            await ctx.call("buggy", data)
        except StepBugError as exc:
            seen.append((exc.error_type, str(exc), "bad state" in exc.traceback))
        return await ctx.call("stall", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow")
        await pass_until(app, lambda: stalled == [1])  # past the buggy step's retry sleep
        await pass_until(app, has_event(app, task_id, "reset"))
        assert await app.result(task_id, timeout=PATIENCE) == {"attempt": 2}

    message = "step 1 (buggy) raised ValueError: bad state (a bug in agent 'buggy', 2 tries)"
    assert seen == [("ValueError", message, True)] * 2
    assert tries == [1, 1], "the replay raised the recorded bug without calling the agent"


@pytest.mark.fake_time
async def test_a_bug_cut_short_by_complete_by_notes_its_traceback(
    app: App, alerts: list[Alert]
) -> None:
    @app.agent("odd", retry=RetryPolicy(max_attempts=3, **QUICK))
    async def odd(request: AgentRequest) -> JsonValue:
        if request.retry == 0:
            raise AttributeError("'NoneType' object has no attribute 'id'")
        return await asyncio.Event().wait()  # the second try hangs

    @app.workflow("flow", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("odd", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow")
        task = await fake_time.ended(app, task_id)

    assert task.process_state is ProcessState.ERROR
    (noted,) = [e.detail for e in await app.history(task_id) if e.kind == "step_timed_out"]
    assert noted["tries"] == 2
    assert noted["error"]["type"] == "AttributeError"
    assert noted["error"]["bug"] is True
    assert "raise AttributeError" in noted["error"]["traceback"]
