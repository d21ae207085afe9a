"""Signals (`app.signal`, `ctx.wait_for`) on a FakeClock, with the roles that run them.

A signal sent before the wait and one sent after it are each delivered once; a
waiting task holds no claim and survives every role restarting; three signals
of one name come in the order sent; a wait of an hour with no signal raises
`SignalTimeoutError` at its timeout, which the workflow catches; a cancel or a
deadline while waiting undoes the task. Each test runs on SQLite and
PostgreSQL; the refusals, the same on both, run once.
"""

from __future__ import annotations

import asyncio
import math
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd import AgentRequest, App, ProcessState, SignalTimeoutError, WorkflowContext
from shepherd.core.states import StepKind, StepState
from shepherd.dashboard import create_dashboard
from shepherd.errors import ConfigError, InvalidStateError, PayloadError, UnknownTaskError
from support.backends import sqlite_only
from support.fake_time import PERIODS, clock_of, ended, pass_until, task_is

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task
    from shepherd.testing import FakeClock

pytestmark = pytest.mark.fake_time

HOUR = 3600.0
TOKEN = "the-shared-dashboard-token"


def _waiting(task: Task) -> bool:
    """Pending, unowned, with a wait step running: the task waits for a signal."""
    return (
        task.process_state is ProcessState.PENDING
        and task.locked_by is None
        and any(s.kind is StepKind.SIGNAL and s.state is StepState.RUNNING for s in task.steps)
    )


def _approvals(app: App, calls: dict[str, int]) -> None:
    """Register `approve`: a step, two waits for `go`, a step; `calls` counts the handlers' runs."""

    @app.agent("before")
    async def before(request: AgentRequest) -> JsonValue:
        calls["before"] += 1
        return "asked"

    @app.agent("after")
    async def after(request: AgentRequest) -> JsonValue:
        calls["after"] += 1
        return "done"

    @app.workflow("approve")
    async def approve(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("before", data)
        one = await ctx.wait_for("go", timeout=HOUR)
        two = await ctx.wait_for("go")
        return [first, one, two, await ctx.call("after", data)]


async def test_signals_before_and_after_the_wait_are_each_delivered_once_across_a_restart(
    app: App, store_url: str, fake_clock: FakeClock
) -> None:
    calls = {"before": 0, "after": 0}
    _approvals(app, calls)
    async with app.running():
        task_id = await app.submit("approve", {"order": 7})
        early = await app.signal(task_id, "go", {"n": 1})  # before any wait
        await pass_until(app, task_is(app, task_id, _waiting))
        waiting = await app.get_task(task_id)
    assert calls == {"before": 1, "after": 0}
    assert waiting.complete_by is None
    assert waiting.not_before is not None
    assert waiting.not_before.year == 9000  # no timeout: only a signal wakes it
    (wait,) = [s for s in waiting.steps if s.state is StepState.RUNNING]
    assert wait.kind is StepKind.SIGNAL
    assert wait.agent == "ctx.wait_for:go"

    # Every role stops, then a new app on the same store finds the task still waiting.
    periods: dict[str, Any] = PERIODS
    again = App(store_url, clock=fake_clock, sqlite_synchronous="NORMAL", **periods)
    _approvals(again, calls)
    try:
        async with again.running():
            start = clock_of(again).monotonic()
            await pass_until(again, lambda: clock_of(again).monotonic() - start >= 3)
            assert _waiting(await again.get_task(task_id)), "the restart changed the wait"
            late = await again.signal(task_id, "go", {"n": 2})
            task = await ended(again, task_id)
            signals = await again.operations.signals.of(task_id)
            history = [e.kind for e in await again.history(task_id)]
    finally:
        await again.close()
    assert task.process_state is ProcessState.PROCESSED
    assert task.result == ["asked", {"n": 1}, {"n": 2}, "done"]
    assert calls == {"before": 1, "after": 1}
    assert [(s.id, s.consumed_seq) for s in signals] == [(early, 2), (late, 3)]
    assert history.count("signalled") == 2
    assert history.count("signal_received") == 2
    assert history.count("waiting") == 1


async def test_three_signals_of_one_name_come_in_the_order_sent_and_keys_name_tasks(
    app: App,
) -> None:
    @app.workflow("collect")
    async def collect(ctx: WorkflowContext, data: Any) -> JsonValue:
        return [await ctx.wait_for("item") for _ in range(3)]

    async with app.running():
        task_id = await app.submit("collect", {}, key="basket-1")
        await pass_until(app, task_is(app, task_id, _waiting))
        sent = [await app.signal("basket-1", "item", n, workflow="collect") for n in (1, 2)]
        sent.append(await app.signal(task_id, "item", 3, idempotency_key="third"))
        again = await app.signal(task_id, "item", 3, idempotency_key="third")
        task = await ended(app, task_id)
        with pytest.raises(InvalidStateError, match=r"cannot signal 'item' to task .*: it is"):
            await app.signal(task_id, "item", 4)
        signals = await app.operations.signals.of(task_id)
    assert again == sent[2]  # the same key twice: one signal
    assert task.result == [1, 2, 3]
    assert [s.id for s in signals] == sent
    assert [s.consumed_seq for s in signals] == [1, 2, 3]


async def test_a_wait_of_an_hour_with_no_signal_raises_at_its_timeout(app: App) -> None:
    @app.workflow("patient")
    async def patient(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            return await ctx.wait_for("approval", timeout=HOUR)
        except SignalTimeoutError as exc:
            return f"timed out waiting for {exc.name}"

    clock = clock_of(app)
    async with app.running():
        task_id = await app.submit("patient", {})
        await pass_until(app, task_is(app, task_id, _waiting))
        waiting = await app.get_task(task_id)
        (wait,) = waiting.steps
        assert wait.complete_by == waiting.not_before
        assert wait.complete_by is not None
        clock.set(wait.complete_by - timedelta(seconds=2))
        task = await ended(app, task_id)
        late = await app.operations.signals.of(task_id)
    assert task.result == "timed out waiting for approval"
    assert clock.now() >= wait.complete_by
    (timed_out,) = task.steps
    assert timed_out.state is StepState.FAILED
    assert late == []


async def test_a_cancel_or_a_deadline_while_waiting_undoes_the_task(app: App) -> None:
    undone: list[JsonValue] = []

    @app.agent("book")
    async def book(request: AgentRequest) -> JsonValue:
        return {"booking": 7}

    @app.agent("unbook")
    async def unbook(request: AgentRequest) -> JsonValue:
        undone.append(request.payload)
        return None

    @app.workflow("hold")
    async def hold(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("book", data, undo="unbook")
        return await ctx.wait_for("confirm")

    async with app.running():
        cancelled = await app.submit("hold", {"n": 1})
        overdue = await app.submit("hold", {"n": 2}, deadline=60)
        await pass_until(app, task_is(app, cancelled, _waiting))
        with pytest.raises(InvalidStateError, match="not sleeping"):
            await app.operations.wake(cancelled, by="ops")  # a wait is woken by a signal
        await app.operations.cancel(cancelled, by="ops")
        first = await ended(app, cancelled)
        second = await ended(app, overdue)
        with pytest.raises(InvalidStateError, match="cancelled"):
            await app.signal(cancelled, "confirm", None)
    assert first.process_state is ProcessState.CANCELLED
    assert second.process_state is ProcessState.CANCELLED
    assert sorted(str(u["request"]) for u in undone if isinstance(u, dict)) == [
        "{'n': 1}",
        "{'n': 2}",
    ]
    assert [s.kind for s in first.steps] == [StepKind.FORWARD, StepKind.SIGNAL, StepKind.UNDO]


@sqlite_only()
async def test_bad_signals_are_refused_by_name_and_store_nothing(app: App) -> None:
    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.wait_for("go")

    async with app.running(["scheduler"]):
        task_id = await app.submit("wf", {})
        await pass_until(app, task_is(app, task_id, _waiting))
        with pytest.raises(UnknownTaskError, match="'no-such-task'"):
            await app.signal("no-such-task", "go", 1)
        with pytest.raises(UnknownTaskError, match="'wf/no-such-key'"):
            await app.signal("no-such-key", "go", 1, workflow="wf")
        with pytest.raises(PayloadError, match="non-empty"):
            await app.signal(task_id, "", 1)
        with pytest.raises(PayloadError, match="signal name"):
            await app.signal(task_id, "n" * 201, 1)
        with pytest.raises(PayloadError, match="not JSON"):
            await app.signal(task_id, "go", {1, 2})
        with pytest.raises(PayloadError, match="over"):
            await app.signal(task_id, "go", "x" * (2 * 1024 * 1024))
        assert await app.operations.signals.of(task_id) == []
        assert _waiting(await app.get_task(task_id))


@pytest.mark.parametrize(
    ("wait", "error", "says"),
    [
        (lambda ctx: ctx.wait_for("go", timeout=-1), ConfigError, "timeout must be >= 0"),
        (lambda ctx: ctx.wait_for("go", timeout=math.nan), ConfigError, "not nan"),
        (lambda ctx: ctx.wait_for("", timeout=1), PayloadError, "non-empty"),
        (lambda ctx: ctx.wait_for("n" * 201), PayloadError, "signal name"),
        (
            lambda ctx: asyncio.gather(ctx.wait_for("go"), ctx.wait_for("go")),
            ConfigError,
            "another call or wait of the workflow is in flight",
        ),
    ],
)
@sqlite_only()
async def test_a_bad_wait_is_refused_by_name_and_records_nothing(
    app: App, wait: Any, error: type[Exception], says: str
) -> None:
    refused: list[Exception] = []

    @app.workflow("bad")
    async def bad(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            await wait(ctx)
        except Exception as exc:  # the refusal is the workflow's to see
            refused.append(exc)
            return "refused"
        return "waited"  # pragma: no cover

    async with app.running(["scheduler"]):
        task = await ended(app, await app.submit("bad", {}))
    assert task.result == "refused"
    (exc,) = refused
    assert isinstance(exc, error)
    assert says in str(exc)
    assert task.steps == ()


@sqlite_only()
async def test_a_wait_from_a_handler_or_outside_its_run_is_refused(app: App) -> None:
    captured: list[WorkflowContext] = []
    told: list[str] = []

    @app.agent("sneaky")
    async def sneaky(request: AgentRequest) -> JsonValue:
        try:
            await captured[0].wait_for("go")
        except ConfigError as exc:
            told.append(str(exc))
        return "done"

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        captured.append(ctx)
        return await ctx.call("sneaky", data)

    async with app.running():
        task = await ended(app, await app.submit("wf", {}))
    assert task.result == "done"
    with pytest.raises(ConfigError, match="outside its workflow's run"):
        await captured[0].wait_for("go")  # plain code, after the run
    (message,) = told
    assert "outside its workflow's run" in message or "in flight" in message


@sqlite_only()
async def test_the_dashboard_lists_a_tasks_signals_and_its_form_sends_one(app: App) -> None:
    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.wait_for("approval")

    async with app.running():
        task_id = await app.submit("wf", {})
        await pass_until(app, task_is(app, task_id, _waiting))
        transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            login = await http.post("/login", data={"token": TOKEN, "next": "/"})
            assert login.status_code == 303
            page = (await http.get(f"/tasks/{task_id}")).text
            assert '<p id="waiting-for">waiting for <code>approval</code>' in page
            assert f'action="/tasks/{task_id}/signal"' in page
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf is not None
            form = {"csrf": csrf.group(1), "signal_name": "approval"}
            bad = await http.post(
                f"/tasks/{task_id}/signal", data={**form, "signal_payload": "{no"}
            )
            assert bad.status_code == 400
            assert "{no" in bad.text  # what was typed is kept
            empty = await http.post(f"/tasks/{task_id}/signal", data={**form, "signal_name": ""})
            assert empty.status_code == 400
            assert await app.operations.signals.of(task_id) == []
            sent = await http.post(
                f"/tasks/{task_id}/signal", data={**form, "signal_payload": '{"ok":1}'}
            )
            assert sent.status_code == 303
            task = await ended(app, task_id)
            assert task.result == {"ok": 1}
            page = (await http.get(f"/tasks/{task_id}")).text
            assert 'id="signal-' in page
            assert 'action="/tasks/' + task_id + '/signal"' not in page  # ended: no form
            late = await http.post(f"/tasks/{task_id}/signal", data={**form, "signal_payload": "1"})
            assert late.status_code == 409
            assert "processed" in late.text
    (signalled,) = [e for e in await app.history(task_id) if e.kind == "signalled"]
    assert isinstance(signalled.detail, dict)
    assert signalled.detail["by"]  # the operator the dashboard knows the session as


async def test_a_timed_out_wait_in_error_gets_a_signal_sent_before_the_operators_retry(
    app: App,
) -> None:
    @app.workflow("strict")
    async def strict(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.wait_for("go", timeout=60)  # a timeout not caught: the task fails

    async with app.running():
        task_id = await app.submit("strict", {})
        failed = await ended(app, task_id)
        assert failed.process_state is ProcessState.ERROR
        assert "SignalTimeoutError" in str(failed.error)
        await app.signal(task_id, "go", "at last")  # a task in error takes signals
        await app.operations.retry(task_id, by="ops")
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert task.result == "at last"
