"""Delayed tasks and task deadlines on a FakeClock, with the roles that run them.

A `delay=60` task is not claimed at 59 s and is at 60 s. A `deadline=10` task
whose agent hangs is cancelled by the supervisor alone (no scheduler, no
agent running) by 10 s plus one scan interval, with the reason `deadline
passed`, and ends `cancelled`, its completed step undone, once a worker
starts. Each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd import AgentRequest, App, ConfigError, ProcessState, Submission, WorkflowContext
from shepherd.core.timing import DEADLINE_PASSED
from shepherd.dashboard import create_dashboard
from support.backends import sqlite_only
from support.fake_time import PATIENCE, PERIODS, clock_of, ended, pass_until, task_is

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

TOKEN = "the-shared-dashboard-token"


async def test_a_delayed_task_is_claimed_at_its_time_not_before(app: App) -> None:
    clock = clock_of(app)
    ran: list[float] = []

    @app.workflow("later")
    async def later(ctx: WorkflowContext, data: Any) -> JsonValue:
        ran.append(clock.monotonic())
        return "done"

    start = clock.monotonic()
    async with app.running(["scheduler", "supervisor"]):
        task_id = await app.submit("later", {}, delay=60)
        # Moved one wake-up at a time up to 59 s: the task is never claimed.
        await pass_until(app, lambda: clock.monotonic() - start >= 59)
        task = await app.get_task(task_id)
        assert task.process_state is ProcessState.PENDING
        assert task.lock_epoch == 0
        assert ran == []
        await pass_until(
            app, task_is(app, task_id, lambda t: t.process_state is ProcessState.PROCESSED)
        )
    assert ran == [start + 60]
    assert (await app.get_task(task_id)).result == "done"


async def test_a_hanging_task_is_cancelled_at_its_deadline_with_no_worker_running(
    app: App,
) -> None:
    clock = clock_of(app)
    entered = asyncio.Event()
    undone: list[JsonValue] = []

    @app.agent("book")
    async def book(request: AgentRequest) -> JsonValue:
        return {"booking": 1}

    @app.agent("unbook")
    async def unbook(request: AgentRequest) -> JsonValue:
        undone.append(request.payload)
        return None

    @app.agent("hang")
    async def hang(request: AgentRequest) -> JsonValue:
        entered.set()
        await asyncio.Event().wait()
        return None  # pragma: no cover

    @app.workflow("trip")
    async def trip(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("book", data, undo="unbook")
        return await ctx.call("hang", data, within=600)

    async with app.running():
        task_id = await app.submit("trip", {"to": "Oslo"}, deadline=10)
        submitted = clock.now()
        await asyncio.wait_for(entered.wait(), PATIENCE)  # the clock stands still meanwhile
    # Every worker is stopped: only the supervisor runs.
    async with app.running(["supervisor"]):
        await pass_until(
            app, task_is(app, task_id, lambda t: t.process_state is ProcessState.COMPENSATING)
        )
    cancelled = await app.get_task(task_id)
    assert cancelled.error["reason"] == DEADLINE_PASSED
    assert cancelled.cancel_requested
    assert cancelled.deadline == submitted + timedelta(seconds=10)
    interval = timedelta(seconds=PERIODS["supervisor_interval"])
    assert cancelled.updated_at <= cancelled.deadline + interval
    assert undone == []

    async with app.running():
        task = await ended(app, task_id)
    assert task.process_state is ProcessState.CANCELLED
    assert task.error["reason"] == DEADLINE_PASSED
    assert len(undone) == 1


AWARE = datetime(2030, 1, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("timing", "field", "says"),
    [
        ({"delay": -1}, "delay", "delay must be >= 0 seconds, not -1"),
        ({"delay": math.nan}, "delay", "delay must be a finite number of seconds, not nan"),
        ({"delay": math.inf}, "delay", "delay must be a finite number of seconds, not inf"),
        ({"delay": 10**400}, "delay", "delay must be at most"),
        ({"delay": 1e300}, "delay", "delay must be at most"),
        ({"delay": "30"}, "delay", "delay must be a number of seconds, not str"),
        ({"deadline": -5}, "deadline", "deadline must be > 0 seconds, not -5"),
        ({"deadline": 0}, "deadline", "deadline must be > 0 seconds, not 0"),
        ({"deadline": math.nan}, "deadline", "deadline must be a finite number"),
        ({"deadline": -math.inf}, "deadline", "deadline must be a finite number"),
        ({"deadline": 1e20}, "deadline", "deadline must be at most"),
        ({"delay": 5, "not_before": AWARE}, "delay", "delay (seconds from now) or not_before"),
        ({"not_before": datetime(2030, 1, 1)}, "not_before", "must be an aware datetime"),
        ({"not_before": "2030-01-01T00:00Z"}, "not_before", "must be a datetime, not str"),
        ({"not_before": datetime(9999, 1, 1, tzinfo=UTC)}, "not_before", "before 9000"),
    ],
)
@sqlite_only()
async def test_bad_timing_is_refused_by_name_and_nothing_is_stored(
    app: App, timing: dict[str, Any], field: str, says: str
) -> None:
    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    with pytest.raises(ConfigError) as refused:
        await app.submit("wf", 1, **timing)
    assert refused.value.field == field
    assert says in refused.value.message
    with pytest.raises(ConfigError) as refused_many:
        await app.submit_many([Submission("wf", 1), Submission("wf", 2, **timing)])
    assert refused_many.value.message.startswith("submissions[1]: ")
    assert says in refused_many.value.message
    assert await app.list_tasks() == []


@sqlite_only()
async def test_a_workflow_deadline_is_checked_at_registration_and_applies_by_default(
    app: App,
) -> None:
    with pytest.raises(ConfigError, match="deadline must be > 0 seconds"):
        app.workflow("bad", deadline=-1)

    @app.workflow("timed", deadline=30)
    async def timed(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    default = await app.get_task(await app.submit("timed", 1))
    own = await app.get_task(await app.submit("timed", 2, deadline=5, delay=10))
    assert default.deadline == default.not_before + timedelta(seconds=30)
    assert own.not_before == own.created_at + timedelta(seconds=10)
    assert own.deadline == own.not_before + timedelta(seconds=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'dealy'"):
        await app.submit("timed", 3, dealy=5)  # type: ignore[call-arg]


@sqlite_only()
async def test_the_dashboard_shows_when_a_waiting_task_is_due_and_its_deadline(app: App) -> None:
    @app.workflow("wf")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data

    waiting = await app.submit("wf", 1, not_before=AWARE + timedelta(days=3), deadline=60)
    due = "2030-01-04 12:00:00"
    transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.post("/login", data={"token": TOKEN, "next": "/"})).status_code == 303
        listing = (await http.get("/tasks")).text
        page = (await http.get(f"/tasks/{waiting}")).text
        clock_of(app).set(AWARE + timedelta(days=3))
        listing_after = (await http.get("/tasks")).text
    assert f"due {due}" in listing
    assert f'<dd id="due">{due}' in page
    assert '<dd id="deadline">2030-01-04 12:01:00' in page
    assert "due " not in listing_after  # due now: it says nothing more
