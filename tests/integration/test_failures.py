"""Every failure the seed names, injected for real into an App running all its roles.

Each test registers its own workflows and agents on a fresh App (the `app`
fixture, on SQLite and PostgreSQL), makes an agent fail (transiently,
permanently, by hanging past `complete_by`), and checks that the task still
comes to one of its four ends: `processed`, `compensated`, `cancelled`, or
`error` with a reason and an alert. The tests that wait for windows and scans
run on a FakeClock (`fake_time`) and move it (support.fake_time).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, cast

import pytest

from shepherd import (
    AgentRequest,
    App,
    PayloadError,
    PermanentError,
    ProcessState,
    RetryPolicy,
    ShepherdError,
    StepState,
    TaskFailedError,
    TransientError,
    UnknownWorkflowError,
    WorkflowContext,
)
from shepherd.core.states import StepKind
from shepherd.errors import InvalidStateError
from shepherd.testing import wait_until
from support import fake_time
from support.backends import sqlite_only
from support.fake_time import WINDOW, has_event, pass_until
from support.spies import spy_on_replies

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, Awaitable

    from shepherd import Alert
    from shepherd.core.records import Event, JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def ended(app: App, task_id: str) -> Task:
    """Wait until the task has ended (or is in `error`), then return it with its steps."""
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


async def kinds(app: App, task_id: str) -> list[str]:
    return [e.kind for e in await app.history(task_id)]


def forever() -> Awaitable[bool]:
    """An await that never ends on its own: a remote call that hangs."""
    return asyncio.Event().wait()


def recorder(
    app: App, name: str, log: list[tuple[str, JsonValue]], result: JsonValue = None
) -> None:
    """Register agent `name`, which logs (name, payload) and returns `result` (or its name)."""

    @app.agent(name)
    async def handler(request: AgentRequest) -> JsonValue:
        log.append((name, request.payload))
        return {"done": name} if result is None else result


# -- transient failures ---------------------------------------------------------------
async def test_transient_errors_are_retried_with_the_same_idempotency_key(app: App) -> None:
    calls: list[AgentRequest] = []

    @app.agent("charge", retry=RetryPolicy(initial_delay=0.01, max_delay=0.02))
    async def charge(request: AgentRequest) -> JsonValue:
        calls.append(request)
        if len(calls) <= 2:
            raise TransientError("service unavailable")
        return {"charged": request.payload["amount"]}

    @app.workflow("pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("charge", data, within=5.0)

    async with app.running():
        task_id = await app.submit("pay", {"amount": 5})
        assert await app.result(task_id, timeout=PATIENCE) == {"charged": 5}

    assert len(calls) == 3
    assert {c.idempotency_key for c in calls} == {f"{task_id}/1"}
    assert [(c.attempt, c.retry) for c in calls] == [(1, 0), (1, 1), (1, 2)]
    task = await app.get_task(task_id)
    assert task.failure_count == 0
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 1)]


# -- an agent that hangs past complete_by ---------------------------------------------
@pytest.mark.fake_time
async def test_a_hung_agent_is_cancelled_at_complete_by_and_the_step_runs_again(app: App) -> None:
    executions: list[int] = []
    cancelled: list[str] = []
    replies = spy_on_replies(app)

    @app.agent("slow")
    async def slow(request: AgentRequest) -> JsonValue:
        executions.append(request.attempt)
        if request.attempt == 1:
            try:
                await forever()
            except asyncio.CancelledError:
                cancelled.append(request.idempotency_key)
                raise
        return {"attempt": request.attempt}

    @app.workflow("hangs", complete_within=5 * WINDOW)
    async def hangs(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("slow", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("hangs", {"n": 1})
        await wait_until(lambda: executions == [1], timeout=PATIENCE)
        await pass_until(app, has_event(app, task_id, "reset"))
        assert await app.result(task_id, timeout=PATIENCE) == {"attempt": 2}

    assert cancelled == [f"{task_id}/1"]
    assert executions == [1, 2]
    assert replies == [(2, True)], "the cancelled attempt must reply nothing"
    task = await app.get_task(task_id)
    assert task.failure_count == 1
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 2)]
    history = await app.history(task_id)
    assert "reset" in [e.kind for e in history]
    assert [e.detail["attempt"] for e in history if e.kind == "step_completed"] == [2]


# -- permanent failures and compensation ----------------------------------------------
def order_app(
    app: App, undone: list[tuple[str, JsonValue]], *, catch: bool
) -> list[PermanentError]:
    """An order workflow whose 5th step (`ship`) fails permanently; returns what it saw."""
    done: list[tuple[str, JsonValue]] = []
    seen: list[PermanentError] = []
    for name in ("reserve", "charge", "notify", "invoice"):
        recorder(app, name, done)
    for name in ("unreserve", "uncharge", "uninvoice", "unship"):
        recorder(app, name, undone)

    @app.agent("ship")
    async def ship(request: AgentRequest) -> JsonValue:
        raise PermanentError("address unknown")

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        await ctx.call("charge", data, undo="uncharge")
        await ctx.call("notify", data)  # nothing to undo
        await ctx.call("invoice", data, undo="uninvoice")
        try:
            await ctx.call("ship", data, undo="unship")
        except PermanentError as exc:
            seen.append(exc)
            if not catch:
                raise
            return {"shipped": False, "why": exc.message}
        return {"shipped": True}

    return seen


async def test_an_unhandled_permanent_error_undoes_completed_steps_in_reverse_order(
    app: App, alerts: list[Alert]
) -> None:
    undone: list[tuple[str, JsonValue]] = []
    seen = order_app(app, undone, catch=False)

    async with app.running():
        task_id = await app.submit("order", {"order": 7})
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)

    assert failed.value.state == "compensated"
    (error,) = seen
    assert (error.message, error.agent, error.seq) == ("address unknown", "ship", 5)
    assert [name for name, _ in undone] == ["uninvoice", "uncharge", "unreserve"]
    assert [payload["seq"] for _, payload in undone] == [4, 2, 1]
    assert undone[0][1] == {
        "request": {"order": 7},
        "result": {"done": "invoice"},
        "seq": 4,
        "idempotency_key": f"{task_id}/4",
        "outcome": "completed",
    }
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.COMPENSATED
    assert "address unknown" in task.error["reason"]
    forward = {s.seq: s.state for s in task.steps if s.kind is StepKind.FORWARD}
    assert forward == {
        1: StepState.COMPENSATED,
        2: StepState.COMPENSATED,
        3: StepState.COMPLETED,
        4: StepState.COMPENSATED,
        5: StepState.FAILED,
    }
    assert alerts == []


async def test_a_workflow_that_catches_a_permanent_error_carries_on(app: App) -> None:
    undone: list[tuple[str, JsonValue]] = []
    seen = order_app(app, undone, catch=True)

    async with app.running():
        task_id = await app.submit("order", {"order": 8})
        result = await app.result(task_id, timeout=PATIENCE)

    assert result == {"shipped": False, "why": "address unknown"}
    assert len(seen) == 1
    assert undone == []
    assert (await app.get_task(task_id)).process_state is ProcessState.PROCESSED


async def test_compensation_that_cannot_finish_ends_in_error_with_an_alert(
    app: App, alerts: list[Alert]
) -> None:
    @app.agent("reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        return {"reserved": True}

    @app.agent("unreserve")
    async def unreserve(request: AgentRequest) -> JsonValue:
        raise PermanentError("ledger closed")

    @app.agent("ship")
    async def ship(request: AgentRequest) -> JsonValue:
        raise PermanentError("no truck")

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        return await ctx.call("ship", data)

    async with app.running():
        task_id = await app.submit("order", {"order": 9}, key="order-9")
        task = await ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    assert "compensation could not finish" in task.error["reason"]
    assert "no truck" in task.error["cause"]["reason"]
    assert "ledger closed" in str(task.error["undo_error"])
    (alert,) = alerts
    assert (alert.task_id, alert.key, alert.workflow) == (task_id, "order-9", "order")
    assert "compensation could not finish" in alert.reason


# -- supervision: expiries counted up to max_failures ---------------------------------
@pytest.mark.fake_time
@pytest.mark.parametrize("on_exhausted", ["error", "compensate"])
async def test_exhausting_max_failures_escalates_or_compensates(
    app: App, alerts: list[Alert], on_exhausted: Any
) -> None:
    undone: list[tuple[str, JsonValue]] = []
    recorder(app, "reserve", [])
    recorder(app, "unreserve", undone)
    hangs: list[int] = []

    @app.agent("stuck")
    async def stuck(request: AgentRequest) -> JsonValue:
        hangs.append(request.attempt)
        return await forever()

    @app.workflow("flow", max_failures=2, on_exhausted=on_exhausted)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        return await ctx.call("stuck", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow", {"n": 1}, key="k-1")
        await wait_until(lambda: hangs == [1], timeout=PATIENCE)
        await pass_until(app, has_event(app, task_id, "reset"))
        await wait_until(lambda: hangs == [1, 2], timeout=PATIENCE)
        task = await fake_time.ended(app, task_id)
        if on_exhausted == "error":
            await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert hangs == [1, 2]
    history = await kinds(app, task_id)
    assert history.count("reset") == 1
    if on_exhausted == "error":
        assert task.process_state is ProcessState.ERROR
        assert task.failure_count == 2
        assert "complete_by expired 2 times" in task.error["reason"]
        # The reason says what the agent last reported, not only the count.
        assert "step 2 (stuck) was cancelled at complete_by" in task.error["reason"], history
        assert history.count("step_timed_out") == 2
        (alert,) = alerts
        assert (alert.task_id, alert.key, alert.failure_count) == (task_id, "k-1", 2)
        assert alert.reason == task.error["reason"]
        assert undone == []
    else:
        assert task.process_state is ProcessState.COMPENSATED
        assert "complete_by expired 2 times" in task.error["reason"]
        assert [name for name, _ in undone] == ["unreserve"]
        assert "compensating" in history
        assert alerts == []


# -- the business key -------------------------------------------------------------------
async def test_a_repeated_key_is_the_same_task(app: App) -> None:
    recorder(app, "a", [])

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("a", data)

    first = await app.submit("wf", {"v": 1}, key="order-42")
    again = await app.submit("wf", {"v": 2}, key="order-42")
    racing = await asyncio.gather(*(app.submit("wf", {"v": i}, key="order-43") for i in range(10)))

    assert again == first
    assert len(set(racing)) == 1
    tasks = await app.list_tasks()
    assert sorted(t.id for t in tasks) == sorted({first, racing[0]})
    assert (await app.get_task(first)).input == {"v": 1}


# -- non-deterministic replay ----------------------------------------------------------
@pytest.mark.fake_time
async def test_a_replay_that_calls_another_agent_ends_in_error(
    app: App, alerts: list[Alert]
) -> None:
    switched = {"on": False}
    b_calls: list[JsonValue] = []
    recorder(app, "a", [])
    recorder(app, "b", b_calls)

    @app.agent("stall")
    async def stall(request: AgentRequest) -> JsonValue:
        switched["on"] = True  # a code change between the first run and its replay
        return await forever()

    @app.workflow("flow", max_failures=5)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("b" if switched["on"] else "a", data)
        return await ctx.call("stall", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow", None)
        await wait_until(lambda: switched["on"], timeout=PATIENCE)
        task = await fake_time.ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    assert "non-deterministic" in task.error["reason"]
    assert task.error["type"] == "NonDeterminismError"
    assert b_calls == []
    assert [(s.seq, s.agent) for s in task.steps] == [(1, "a"), (2, "stall")]
    assert "non-deterministic" in alerts[0].reason


# -- bad input: clear errors, nothing written --------------------------------------------
def nested(depth: int) -> JsonValue:
    value: JsonValue = []
    for _ in range(depth):
        value = [value]
    return value


@sqlite_only()  # refused before the store is touched
async def test_an_unknown_workflow_is_refused_and_nothing_is_written(app: App) -> None:
    @app.workflow("known")
    async def known(ctx: WorkflowContext, data: Any) -> JsonValue:
        return None

    with pytest.raises(UnknownWorkflowError, match=r"unknown workflow 'nope' \(known: known\)"):
        await app.submit("nope", {"x": 1})

    assert issubclass(UnknownWorkflowError, ShepherdError)
    assert await app.list_tasks() == []


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        pytest.param("x" * (1024 * 1024 + 1), r"over the .*limit", id="over-1MiB"),
        pytest.param({"price": float("nan")}, "NaN", id="NaN"),
        pytest.param(nested(100), "nested deeper", id="nested-100"),
        pytest.param(nested(10_000), "nested deeper", id="nested-10000"),
        pytest.param({"when": object()}, "not JSON", id="object"),
    ],
)
@sqlite_only()  # refused before the store is touched
async def test_a_malformed_payload_is_refused_and_nothing_is_written(
    app: App, payload: JsonValue, problem: str
) -> None:
    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return None

    with pytest.raises(PayloadError, match=problem):
        await app.submit("wf", payload)

    assert await app.list_tasks() == []
    assert [e async for e in _drain_events(app)] == []


async def test_a_configured_payload_limit_applies(tmp_path: Any) -> None:
    app = App(f"sqlite:///{tmp_path}/limit.db", max_payload_bytes=1000, alerts=[])

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return None

    try:
        with pytest.raises(PayloadError):
            await app.submit("wf", "x" * 2000)
    finally:
        await app.close()


async def test_an_unknown_agent_or_a_bad_request_fails_the_task_without_a_step(
    app: App, alerts: list[Alert]
) -> None:
    calls: list[tuple[str, JsonValue]] = []
    recorder(app, "a", calls)
    seen: list[Exception] = []
    # A name held in a variable: the check at start cannot see it, the step refuses it.
    nobody = "nobody"

    @app.workflow("calls_nobody")
    async def calls_nobody(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(nobody, data)

    @app.workflow("undo_nobody")
    async def undo_nobody(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("a", data, undo=nobody)

    @app.workflow("sends_nan")
    async def sends_nan(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            return await ctx.call("a", {"price": float("nan")})
        except PayloadError as exc:
            seen.append(exc)
            raise

    async with app.running():
        ids = [
            await app.submit(name, None) for name in ("calls_nobody", "undo_nobody", "sends_nan")
        ]
        tasks = [await ended(app, task_id) for task_id in ids]
        await wait_until(lambda: len(alerts) == 3, timeout=PATIENCE, message="3 alerts expected")

    for task in tasks:
        assert task.process_state is ProcessState.ERROR
        assert task.steps == ()
    assert tasks[0].error["reason"] == "unknown agent 'nobody'"
    assert tasks[0].error["type"] == "UnknownAgentError"
    assert tasks[1].error["reason"] == "unknown agent 'nobody'"
    assert "PayloadError" in tasks[2].error["reason"]
    assert "NaN" in tasks[2].error["reason"]
    assert len(seen) == 1
    assert calls == []
    assert sorted(a.task_id for a in alerts) == sorted(ids)


# -- the operator -----------------------------------------------------------------------
@pytest.mark.fake_time
async def test_an_operator_retry_finishes_a_task_in_error(app: App, alerts: list[Alert]) -> None:
    attempts: list[int] = []

    @app.agent("flaky")
    async def flaky(request: AgentRequest) -> JsonValue:
        attempts.append(request.attempt)
        if request.attempt == 1:
            return await forever()
        return {"attempt": request.attempt}

    @app.workflow("flow", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("flow", None)
        await wait_until(lambda: attempts == [1], timeout=PATIENCE)
        errored = await fake_time.ended(app, task_id)
        assert errored.process_state is ProcessState.ERROR
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

        retried = await app.retry(task_id)
        assert retried.process_state is ProcessState.PENDING
        result = await app.result(task_id, timeout=PATIENCE)

        with pytest.raises(InvalidStateError):
            await app.retry(task_id)

    assert result == {"attempt": 2}
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 2)]
    assert "retried" in await kinds(app, task_id)


async def test_an_operator_cancel_undoes_the_task_and_ends_it_cancelled(app: App) -> None:
    undone: list[tuple[str, JsonValue]] = []
    recorder(app, "reserve", [])
    recorder(app, "release", undone)
    recorder(app, "refund", undone)
    charging = asyncio.Event()

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        charging.set()
        return await forever()  # the operator gives up on it

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="release")
        await ctx.call("charge", data, undo="refund", within=60.0)
        return {"charged": True}

    async with app.running():
        task_id = await app.submit("order", {"order": 1})
        await asyncio.wait_for(charging.wait(), PATIENCE)

        await app.cancel(task_id)
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)

        with pytest.raises(InvalidStateError):
            await app.cancel(task_id)

    assert failed.value.state == "cancelled"
    assert [name for name, _ in undone] == ["refund", "release"]
    # The charge may or may not have happened: its undo is told so.
    assert [payload["outcome"] for _, payload in undone] == ["unknown", "completed"]
    history = await kinds(app, task_id)
    assert "cancel_requested" in history
    assert history[-1] == "cancelled"


async def test_cancelling_a_task_that_never_ran_ends_it_cancelled(app: App) -> None:
    recorder(app, "a", [])

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("a", data, undo="a")

    task_id = await app.submit("wf", None)
    await app.cancel(task_id)
    async with app.running():
        task = await ended(app, task_id)

    assert task.process_state is ProcessState.CANCELLED
    assert task.steps == ()


# -- status events ------------------------------------------------------------------------
async def test_events_for_a_reply_to_queue_follow_the_task_to_its_end(app: App) -> None:
    recorder(app, "a", [])
    recorder(app, "b", [])

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("a", data)
        return await ctx.call("b", data)

    seen: list[Event] = []
    async with app.running():
        task_id = await app.submit("wf", {"n": 1}, key="order-7", reply_to="inbox")
        await app.submit("wf", {"n": 2}, key="order-8", reply_to="elsewhere")
        async with (
            asyncio.timeout(PATIENCE),
            contextlib.aclosing(cast("AsyncGenerator[Event, None]", app.events("inbox"))) as events,
        ):
            async for event in events:
                seen.append(event)
                if event.kind == "processed":
                    break

    assert seen[0].kind == "received"
    assert seen[-1].kind == "processed"
    assert seen[-1].detail == {"result": {"done": "b"}}
    assert [e.kind for e in seen].count("step_completed") == 2
    assert "claimed" in [e.kind for e in seen]
    assert {(e.task_id, e.key, e.reply_to) for e in seen} == {(task_id, "order-7", "inbox")}
    assert [e.id for e in seen] == sorted(e.id for e in seen)


async def _drain_events(app: App) -> Any:
    """Every event written so far (for all reply_to queues)."""
    for event in await app.store.read_events(reply_to=None, after_id=0):
        yield event
