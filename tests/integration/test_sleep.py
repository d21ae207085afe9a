"""Durable sleep (`ctx.sleep`) on a FakeClock, with the roles that run it.

A workflow that sleeps an hour holds no claim while asleep (its task is
pending, unowned, due at the wake-up), resumes after every role is stopped
and a new app on the same store starts, and does not run its earlier step
again; one woken by an operator goes on at once. Each test runs on SQLite
and on PostgreSQL, but the refusals, which are the same on both, run once.
"""

from __future__ import annotations

import asyncio
import math
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd import AgentRequest, App, ProcessState, WorkflowContext
from shepherd.core.states import StepKind, StepState
from shepherd.dashboard import create_dashboard
from shepherd.errors import InvalidStateError, UnknownTaskError
from support.backends import sqlite_only
from support.fake_time import PERIODS, clock_of, ended, has_event, pass_until, task_is

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task
    from shepherd.testing import FakeClock

pytestmark = pytest.mark.fake_time

HOUR = 3600.0
TOKEN = "the-shared-dashboard-token"


def _napping(app: App, calls: dict[str, int]) -> None:
    """Register `nap`: a step, a sleep of an hour, a step; `calls` counts each handler's runs."""

    @app.agent("before")
    async def before(request: AgentRequest) -> JsonValue:
        calls["before"] += 1
        return "fed"

    @app.agent("after")
    async def after(request: AgentRequest) -> JsonValue:
        calls["after"] += 1
        return "walked"

    @app.workflow("nap")
    async def nap(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("before", data)
        await ctx.sleep(HOUR)
        return [first, await ctx.call("after", data)]


def _asleep(task: Task) -> bool:
    return task.process_state is ProcessState.PENDING and any(
        s.kind is StepKind.SLEEP for s in task.steps
    )


async def test_a_sleep_holds_no_claim_and_survives_every_role_restarting(
    app: App, store_url: str, fake_clock: FakeClock
) -> None:
    calls = {"before": 0, "after": 0}
    _napping(app, calls)
    clock = clock_of(app)
    async with app.running():
        task_id = await app.submit("nap", {"dog": "Rex"})
        await pass_until(app, task_is(app, task_id, _asleep))
        slept_at = clock.now()
        asleep = await app.get_task(task_id)
    # Asleep: no claim, no running step (no agent slot), due at the recorded wake-up.
    (sleep,) = [s for s in asleep.steps if s.kind is StepKind.SLEEP]
    assert asleep.locked_by is None
    assert asleep.complete_by is None
    assert sleep.complete_by == asleep.not_before
    assert sleep.complete_by is not None
    fell_asleep = sleep.complete_by - timedelta(seconds=HOUR)
    assert slept_at - timedelta(seconds=2) <= fell_asleep <= slept_at
    assert [s.state for s in asleep.steps] == [StepState.COMPLETED, StepState.COMPLETED]
    assert calls == {"before": 1, "after": 0}
    assert "sleeping" in [e.kind for e in await app.history(task_id)]

    # Every role is stopped; the hour passes (but for 3 s) with nothing running.
    clock.set(sleep.complete_by - timedelta(seconds=3))
    periods: dict[str, Any] = PERIODS
    again = App(store_url, clock=fake_clock, sqlite_synchronous="NORMAL", **periods)
    _napping(again, calls)
    try:
        async with again.running():
            start = clock.monotonic()
            await pass_until(again, lambda: clock.monotonic() - start >= 2)
            early = await again.get_task(task_id)
            assert early.process_state is ProcessState.PENDING, "woken before its time"
            assert calls["after"] == 0
            task = await ended(again, task_id)
    finally:
        await again.close()
    assert task.process_state is ProcessState.PROCESSED
    assert task.result == ["fed", "walked"]
    assert calls == {"before": 1, "after": 1}  # the earlier step did not run again
    assert clock.now() >= sleep.complete_by


async def test_an_operator_wakes_a_sleeping_task_and_it_goes_on_at_once(app: App) -> None:
    calls = {"before": 0, "after": 0}
    _napping(app, calls)
    clock = clock_of(app)
    async with app.running():
        task_id = await app.submit("nap", {})
        await pass_until(app, task_is(app, task_id, _asleep))
        with pytest.raises(InvalidStateError, match="not sleeping"):
            await app.operations.wake(await app.submit("nap", {}, delay=HOUR), by="ops")
        with pytest.raises(UnknownTaskError):
            await app.operations.wake("no-such-task", by="ops")
        start = clock.monotonic()
        await app.operations.wake(task_id, by="ops")
        task = await ended(app, task_id)
        assert clock.monotonic() - start < 60  # at once, not an hour later
        with pytest.raises(InvalidStateError, match="processed"):
            await app.operations.wake(task_id, by="ops")
    assert task.result == ["fed", "walked"]
    assert calls == {"before": 1, "after": 1}
    (woken,) = [e for e in await app.history(task_id) if e.kind == "woken"]
    assert isinstance(woken.detail, dict)
    assert woken.detail["by"] == "ops"


async def test_a_cancelled_sleeping_task_undoes_its_steps_around_its_sleep(app: App) -> None:
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
        await ctx.sleep(HOUR)
        return "kept"

    async with app.running():
        task_id = await app.submit("hold", {})
        await pass_until(app, task_is(app, task_id, _asleep))
        await app.operations.cancel(task_id, by="ops")
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.CANCELLED
    assert len(undone) == 1
    undo = [s for s in task.steps if s.kind is StepKind.UNDO]
    assert [s.seq for s in undo] == [3]  # after the sleep's seq 2, never on it


@pytest.mark.parametrize(
    ("sleep", "says"),
    [
        (lambda ctx: ctx.sleep(-1), "ctx.sleep's seconds must be >= 0 seconds, not -1"),
        (lambda ctx: ctx.sleep(math.nan), "must be a finite number of seconds, not nan"),
        (lambda ctx: ctx.sleep(math.inf), "must be a finite number of seconds, not inf"),
        (lambda ctx: ctx.sleep("60"), "must be a number of seconds, not str"),
        (lambda ctx: ctx.sleep_until(datetime(2030, 1, 1)), "needs an aware datetime"),
        (lambda ctx: ctx.sleep_until("2030-01-01T00:00Z"), "needs a datetime, not str"),
    ],
)
@sqlite_only()
async def test_a_bad_sleep_is_refused_by_name(app: App, sleep: Any, says: str) -> None:
    refused: list[str] = []

    @app.workflow("bad")
    async def bad(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            await sleep(ctx)
        except Exception as exc:  # the refusal is the workflow's to see
            refused.append(f"{type(exc).__name__}: {exc}")
            return "refused"
        return "slept"  # pragma: no cover

    async with app.running(["scheduler"]):
        task_id = await app.submit("bad", {})
        task = await ended(app, task_id)
    assert task.result == "refused"
    (message,) = refused
    assert message.startswith("ConfigError: ")
    assert says in message
    assert not any(s.kind is StepKind.SLEEP for s in task.steps)


@sqlite_only()
async def test_a_sleep_from_a_handler_or_beside_a_call_in_flight_is_refused(app: App) -> None:
    captured: list[WorkflowContext] = []
    told: list[str] = []

    @app.agent("sneaky")
    async def sneaky(request: AgentRequest) -> JsonValue:
        try:
            await captured[0].sleep(1)
        except Exception as exc:
            told.append(str(exc))
        return "done"

    @app.workflow("wf")
    async def wf(ctx: WorkflowContext, data: Any) -> JsonValue:
        captured.append(ctx)
        return await ctx.call("sneaky", data)

    async with app.running():
        task_id = await app.submit("wf", {})
        task = await ended(app, task_id)
    assert task.result == "done"
    (message,) = told
    assert "from an agent's handler" in message
    assert "sleep in the workflow" in message


@sqlite_only()
async def test_sleep_until_a_past_instant_goes_on_at_once_and_records_nothing(app: App) -> None:
    @app.workflow("past")
    async def past(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.sleep_until(datetime(2000, 1, 1, tzinfo=UTC))
        await ctx.sleep(0)
        return "on"

    async with app.running(["scheduler"]):
        task = await ended(app, await app.submit("past", {}))
    assert task.result == "on"
    assert task.steps == ()
    assert not await has_event(app, task.id, "sleeping")()


async def test_a_non_deterministic_sleep_is_an_error(app: App) -> None:
    flip = asyncio.Event()

    @app.agent("noop")
    async def noop(request: AgentRequest) -> JsonValue:
        return None

    @app.workflow("fickle")
    async def fickle(ctx: WorkflowContext, data: Any) -> JsonValue:
        if flip.is_set():
            await ctx.call("noop", 1)  # where a sleep was recorded
        else:
            await ctx.sleep(HOUR)
        return "done"

    async with app.running():
        task_id = await app.submit("fickle", {})
        await pass_until(app, task_is(app, task_id, _asleep))
        flip.set()
        await app.operations.wake(task_id)
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.ERROR
    assert "non-deterministic" in str(task.error)


@sqlite_only()
async def test_the_dashboard_shows_a_sleeping_task_and_its_button_wakes_it(app: App) -> None:
    calls = {"before": 0, "after": 0}
    _napping(app, calls)
    async with app.running():
        task_id = await app.submit("nap", {})
        await pass_until(app, task_is(app, task_id, _asleep))
        transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            login = await http.post("/login", data={"token": TOKEN, "next": "/"})
            assert login.status_code == 303
            page = (await http.get(f"/tasks/{task_id}")).text
            assert '<dd id="asleep">until ' in page
            assert f'action="/tasks/{task_id}/wake"' in page
            csrf = re.search(r'name="csrf" value="([^"]+)"', page)
            assert csrf is not None
            woke = await http.post(f"/tasks/{task_id}/wake", data={"csrf": csrf.group(1)})
            assert woke.status_code == 303
            task = await ended(app, task_id)
            assert task.result == ["fed", "walked"]
            page = (await http.get(f"/tasks/{task_id}")).text
            assert 'id="asleep"' not in page
            again = await http.post(f"/tasks/{task_id}/wake", data={"csrf": csrf.group(1)})
            assert again.status_code == 409
            assert "not sleeping" in again.text
    (woken,) = [e for e in await app.history(task_id) if e.kind == "woken"]
    assert isinstance(woken.detail, dict)
    assert woken.detail["by"]  # the operator the dashboard knows the session as
