"""`request.heartbeat()` and `request.once()` in an App running all its roles, on both backends.

A slow handler that heartbeats keeps its step alive past many windows; one that
stops heartbeating is cancelled at its last complete_by and the step runs again.
A side effect wrapped in `once` runs at most once per step: a later execution
gets the recorded result, and an execution that died mid-effect leaves a mark
that fails the step until the operator retries it. The tests whose steps
outlive their windows run on a FakeClock (`fake_time`) and move it
(support.fake_time).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    Alert,
    App,
    ProcessState,
    StepState,
    StepSupersededError,
    TaskFailedError,
    WorkflowContext,
)
from shepherd.testing import wait_until
from support import fake_time
from support.fake_time import WINDOW, has_event, pass_until
from support.spies import spy_on_replies

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def kinds(app: App, task_id: str) -> list[str]:
    return [e.kind for e in await app.history(task_id)]


def one_step(app: App, agent: str, *, within: float = WINDOW, max_failures: int = 3) -> None:
    """Workflow `flow`: one call of `agent`."""

    @app.workflow("flow", complete_within=5 * WINDOW, max_failures=max_failures)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(agent, data, within=within)


# -- heartbeats -------------------------------------------------------------------------
@pytest.mark.fake_time
async def test_a_handler_that_heartbeats_runs_for_many_windows_without_a_reset(app: App) -> None:
    release = asyncio.Event()
    deadlines: list[datetime] = []
    executions: list[int] = []

    @app.agent("slow")
    async def slow(request: AgentRequest) -> JsonValue:
        executions.append(request.attempt)
        deadlines.append(request.complete_by)
        while not release.is_set():
            deadlines.append(await request.heartbeat())
            assert request.complete_by == deadlines[-1]
            # The heartbeat cadence, on the app's clock: a fraction of the window, as
            # the clock may move on while a beat is written.
            await app.clock.wait_event(release, WINDOW / 4)
        return {"beats": len(deadlines) - 1}

    one_step(app, "slow")

    async with app.running():
        task_id = await app.submit("flow", None)

        async def outlived_three_windows() -> bool:
            return bool(deadlines) and app.store.now() > deadlines[0] + timedelta(
                seconds=3 * WINDOW
            )

        await pass_until(app, outlived_three_windows)
        release.set()
        result = await app.result(task_id, timeout=PATIENCE)

    assert isinstance(result, dict)
    assert result["beats"] >= 3
    assert executions == [1]
    assert deadlines == sorted(deadlines)
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert task.failure_count == 0
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 1)]
    assert "reset" not in await kinds(app, task_id)


@pytest.mark.fake_time
async def test_a_handler_that_stops_heartbeating_is_cancelled_and_the_step_runs_again(
    app: App,
) -> None:
    beats: list[datetime] = []
    cancelled: list[int] = []

    @app.agent("slow")
    async def slow(request: AgentRequest) -> JsonValue:
        if request.attempt == 1:
            beats.append(await request.heartbeat())
            beats.append(await request.heartbeat())
            try:
                await asyncio.Event().wait()  # hangs, and heartbeats no more
            except asyncio.CancelledError:
                cancelled.append(request.attempt)
                raise
        return {"attempt": request.attempt}

    one_step(app, "slow")

    async with app.running():
        task_id = await app.submit("flow", None)
        await wait_until(lambda: len(beats) == 2, timeout=PATIENCE)
        await pass_until(app, has_event(app, task_id, "reset"))
        assert await app.result(task_id, timeout=PATIENCE) == {"attempt": 2}

    assert len(beats) == 2
    assert cancelled == [1]
    task = await app.get_task(task_id)
    assert task.failure_count == 1
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 2)]
    history = await kinds(app, task_id)
    assert "reset" in history
    assert "step_timed_out" in history


async def test_a_heartbeat_after_the_step_was_superseded_raises(app: App) -> None:
    started = asyncio.Event()
    proceed = asyncio.Event()
    superseded: list[StepSupersededError] = []
    replies = spy_on_replies(app)

    @app.agent("slow")
    async def slow(request: AgentRequest) -> JsonValue:
        await request.heartbeat()  # still current: no error
        started.set()
        await proceed.wait()
        try:
            await request.heartbeat()
        except StepSupersededError as exc:
            superseded.append(exc)
            raise
        return {"late": True}

    one_step(app, "slow", within=60.0)

    async with app.running():
        task_id = await app.submit("flow", None)
        await asyncio.wait_for(started.wait(), PATIENCE)
        await app.cancel(task_id)  # the task moves on: this execution is no longer current
        proceed.set()
        with pytest.raises(TaskFailedError):
            await app.result(task_id, timeout=PATIENCE)
        await wait_until(lambda: bool(superseded), timeout=PATIENCE)

    assert (superseded[0].task_id, superseded[0].seq, superseded[0].attempt) == (task_id, 1, 1)
    assert replies == [], "a superseded execution replies nothing"
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.CANCELLED


# -- once ---------------------------------------------------------------------------------
@pytest.mark.fake_time
async def test_once_returns_the_recorded_result_to_a_later_execution(app: App) -> None:
    charges: list[str] = []
    seen: list[tuple[int, JsonValue]] = []

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        async def effect() -> JsonValue:
            charges.append(request.idempotency_key)
            return {"charge_id": f"ch-{len(charges)}"}

        result = await request.once(effect)
        seen.append((request.attempt, result))
        if request.attempt == 1:
            await asyncio.Event().wait()  # dies before replying: cancelled at complete_by
        return result

    one_step(app, "charge")

    async with app.running():
        task_id = await app.submit("flow", {"amount": 5})
        await wait_until(lambda: len(seen) == 1, timeout=PATIENCE)
        await pass_until(app, has_event(app, task_id, "reset"))
        assert await app.result(task_id, timeout=PATIENCE) == {"charge_id": "ch-1"}

    assert charges == [f"{task_id}/1"]
    assert seen == [(1, {"charge_id": "ch-1"}), (2, {"charge_id": "ch-1"})]
    task = await app.get_task(task_id)
    assert task.failure_count == 1
    assert "reset" in await kinds(app, task_id)


@pytest.mark.fake_time
async def test_an_effect_that_raised_is_taken_not_to_have_happened(app: App) -> None:
    attempts: list[int] = []

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        async def effect() -> JsonValue:
            attempts.append(request.attempt)
            if request.attempt == 1:
                raise ConnectionRefusedError("the service refused the connection")
            return {"charged": True}

        if request.attempt == 1:
            with contextlib.suppress(ConnectionRefusedError):
                await request.once(effect, name="card")
            await asyncio.Event().wait()  # then dies before replying
        return await request.once(effect, name="card")

    one_step(app, "charge")

    async with app.running():
        task_id = await app.submit("flow", None)
        await wait_until(lambda: attempts == [1], timeout=PATIENCE)
        await pass_until(app, has_event(app, task_id, "reset"))
        assert await app.result(task_id, timeout=PATIENCE) == {"charged": True}

    assert attempts == [1, 2]


@pytest.mark.fake_time
async def test_a_started_but_unfinished_effect_fails_the_step_until_the_operator_retries(
    app: App, alerts: list[Alert]
) -> None:
    calls: list[int] = []
    hang = True

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        async def effect() -> JsonValue:
            calls.append(request.attempt)
            if hang:
                await asyncio.Event().wait()  # the service never answers: outcome unknown
            return {"charged": request.attempt}

        return await request.once(effect)

    one_step(app, "charge", max_failures=5)

    async with app.running():
        task_id = await app.submit("flow", None)
        await wait_until(lambda: calls == [1], timeout=PATIENCE)
        errored = await fake_time.ended(app, task_id)
        assert errored.process_state is ProcessState.ERROR
        assert calls == [1], "the second execution must not run the effect"
        reason = errored.error["reason"]
        assert f"{task_id}/1" in reason
        assert "may have happened" in reason
        assert f"shepherd retry {task_id} --step 1" in reason
        (step,) = errored.steps
        assert (step.state, step.attempt) == (StepState.FAILED, 2)
        assert step.error["type"] == "OutcomeUnknownError"
        assert errored.error["type"] == "OutcomeUnknownError"
        assert "has an unknown outcome" in reason
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")
        assert alerts[0].task_id == task_id

        hang = False
        await app.retry(task_id, seq=1)
        assert await app.result(task_id, timeout=PATIENCE) == {"charged": 3}

    assert calls == [1, 3]
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PROCESSED
