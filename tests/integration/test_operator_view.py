"""What the dashboard reads and does through `app.operations`: operators, who acted, pages, the overview.

An App running every role processes, fails, retries and cancels tasks; the
history names the operator of each action, the task list pages through them,
and the overview reads the leader, the workers and the tasks that ended.
Runs on SQLite and PostgreSQL (the `app` fixture); the tests that wait for a
step's window run on a FakeClock (`fake_time`) and move it.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import ConfigError, ProcessState, TaskCursor, TaskFailedError
from shepherd.errors import OperatorExistsError, UnknownOperatorError
from shepherd.testing import wait_until
from support import fake_time
from support.backends import sqlite_only
from support.fake_time import WINDOW

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


def _register(app: App) -> list[JsonValue]:
    """Workflow `orders.check` and its agent; the payloads the agent has taken, so far."""
    taken: list[JsonValue] = []

    @app.agent("check")
    async def check(request: AgentRequest) -> JsonValue:
        taken.append(request.payload)
        if request.payload == {"ok": False}:
            await asyncio.Event().wait()  # a remote service that never answers
        return request.payload

    # One expired claim and the task waits in `error` for an operator.
    @app.workflow("orders.check", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("check", data, within=WINDOW)

    return taken


async def _ended(app: App, task_id: str) -> ProcessState:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return (await app.get_task(task_id)).process_state


async def _in_error(app: App, taken: list[JsonValue], task_id: str) -> ProcessState:
    """Once its agent has taken the step that never answers, move time until the task ends."""
    await wait_until(lambda: taken.count({"ok": False}) == 1, timeout=PATIENCE)
    taken.clear()
    return (await fake_time.ended(app, task_id)).process_state


@pytest.mark.fake_time
async def test_the_history_names_who_retried_and_who_cancelled(app: App) -> None:
    taken = _register(app)
    token = await app.operations.add_operator("anna")
    operator = await app.operations.authenticate(token)
    assert operator == "anna"

    async with app.running():
        failed = await app.submit("orders.check", {"ok": False})
        assert await _in_error(app, taken, failed) is ProcessState.ERROR
        await app.retry(failed, seq=1, payload={"ok": True}, by=operator)
        assert await _ended(app, failed) is ProcessState.PROCESSED
        cancelled = await app.submit("orders.check", {"ok": False})
        assert await _in_error(app, taken, cancelled) is ProcessState.ERROR
        await app.cancel(cancelled, by="ben")
        assert await _ended(app, cancelled) is ProcessState.CANCELLED

    retried = [e.detail for e in await app.history(failed) if e.kind == "retried"]
    assert retried == [{"seq": 1, "state": "pending", "by": "anna", "replaced": {"ok": False}}]
    asked = [e.detail for e in await app.history(cancelled) if e.kind == "cancel_requested"]
    assert asked == [{"by": "ben"}]


async def test_operators_are_added_listed_and_removed(app: App) -> None:
    token = await app.operations.add_operator("anna")

    assert [o.name for o in await app.operations.operators()] == ["anna"]
    with pytest.raises(OperatorExistsError, match="exists already"):
        await app.operations.add_operator("anna")
    await app.operations.remove_operator("anna")
    assert await app.operations.authenticate(token) is None
    assert await app.operations.operators() == []
    with pytest.raises(UnknownOperatorError, match="no operator"):
        await app.operations.remove_operator("anna")


async def test_the_task_list_pages_with_every_filter(app: App) -> None:
    _register(app)
    ids = [await app.submit("orders.check", {"n": n}, key=f"K-{n}") for n in range(7)]

    seen: list[str] = []
    page = await app.list_tasks(limit=3)
    while page:
        seen += [t.id for t in page]
        page = await app.list_tasks(
            limit=3, before=TaskCursor.decode(TaskCursor.of(page[-1]).encode())
        )
    assert sorted(seen) == sorted(ids)
    assert len(seen) == 7
    assert [t.id for t in await app.list_tasks(key="K-3")] == [ids[3]]
    assert [t.id for t in await app.list_tasks(id_prefix=ids[4])] == [ids[4]]
    newest = await app.list_tasks(limit=1)
    since = newest[0].created_at
    assert await app.list_tasks(workflow="orders.check", created_from=since) == newest
    assert await app.list_tasks(states=[ProcessState.ERROR]) == []
    assert len(await app.list_tasks(states=[ProcessState.PENDING], workflow="orders.check")) == 7


@pytest.mark.fake_time
async def test_the_overview_reads_counts_throughput_leader_and_workers(app: App) -> None:
    taken = _register(app)
    assert await app.operations.leader() is None

    async with app.running():
        done = [await app.submit("orders.check", {"n": n}) for n in range(3)]
        failed = await app.submit("orders.check", {"ok": False})
        for task_id in done:
            assert await _ended(app, task_id) is ProcessState.PROCESSED
        assert await _in_error(app, taken, failed) is ProcessState.ERROR

        async def leads() -> bool:
            return await app.operations.leader() is not None

        await wait_until(leads, timeout=PATIENCE, message="no supervisor leads")
        lease = await app.operations.leader()
        assert lease is not None
        assert lease.holder.startswith(app.instance)
        assert lease.epoch >= 1
        (worker,) = await app.operations.workers()
        assert worker.instance == app.instance
        assert set(worker.roles) == {"scheduler", "agent", "supervisor"}

    assert await app.operations.count_tasks() == {ProcessState.PROCESSED: 3, ProcessState.ERROR: 1}
    buckets = await app.operations.throughput()
    assert len(buckets) == 60
    assert (sum(b.processed for b in buckets), sum(b.errors for b in buckets)) == (3, 1)
    assert sum(b.cancelled for b in buckets) == sum(b.compensated for b in buckets) == 0
    few = await app.operations.throughput(window=timedelta(minutes=5), bucket=timedelta(seconds=30))
    assert len(few) == 10
    assert sum(b.processed for b in few) == 3
    assert await app.operations.leader() is None  # released at stop
    assert await app.operations.breakers() == []
    (stopped,) = await app.operations.workers()
    assert stopped.stopped_at is not None


@pytest.mark.parametrize(
    ("window", "bucket"),
    [
        (timedelta(0), timedelta(minutes=1)),
        (timedelta(hours=1), timedelta(seconds=-1)),
        (timedelta(days=30), timedelta(seconds=1)),
        (3600, timedelta(minutes=1)),
    ],
)
@sqlite_only()  # refused before the store is touched
async def test_a_bad_throughput_window_is_refused(app: App, window: Any, bucket: Any) -> None:
    with pytest.raises(ConfigError):
        await app.operations.throughput(window=window, bucket=bucket)


async def test_workers_since_is_checked(app: App) -> None:
    with pytest.raises(ConfigError, match="since"):
        await app.operations.workers(since=3600)  # type: ignore[arg-type]
    assert await app.operations.workers(since=timedelta.max) == []
