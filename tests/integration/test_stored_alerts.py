"""Operator alerts are stored with the task that needs an operator, listed and acknowledged by the App.

An App running every role escalates a task (its claim expired `max_failures`
times) or fails it into `error` (its workflow raised): the store then holds
the same alert the sinks were sent, and an operator acknowledges it through
`app.acknowledge_alert`. Runs on SQLite and PostgreSQL (the `app` fixture); the
escalation on a FakeClock (`fake_time`), which the test moves past the step's window.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import ConfigError, ProcessState, TaskFailedError
from shepherd.errors import UnknownAlertError
from shepherd.testing import wait_until
from support import fake_time
from support.fake_time import WINDOW

if TYPE_CHECKING:
    from shepherd import AgentRequest, Alert, App, WorkflowContext
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def _ended(app: App, task_id: str) -> None:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)


@pytest.mark.fake_time
async def test_an_escalated_task_has_a_stored_alert_that_the_operator_acknowledges(
    app: App, alerts: list[Alert]
) -> None:
    entered = asyncio.Event()

    @app.agent("stuck")
    async def stuck(request: AgentRequest) -> JsonValue:
        entered.set()
        return await asyncio.Event().wait()  # a remote call that never answers

    @app.workflow("orders.pay", max_failures=1)
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("stuck", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("orders.pay", {"amount": 12}, key="A-1")
        await asyncio.wait_for(entered.wait(), PATIENCE)  # the clock stands still meanwhile
        await fake_time.ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was sent")

    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.ERROR
    (sent,) = alerts
    (stored,) = await app.alerts()
    assert (stored.task_id, stored.workflow, stored.key) == (task_id, "orders.pay", "A-1")
    assert (stored.reason, stored.failure_count) == (sent.reason, sent.failure_count)
    assert stored.reason == task.error["reason"]
    assert stored.is_open
    assert await app.alerts(open_only=True) == [stored]

    acknowledged = await app.acknowledge_alert(stored.id, by="anna")

    assert (acknowledged.id, acknowledged.acknowledged_by) == (stored.id, "anna")
    assert acknowledged.acknowledged_at is not None
    assert await app.alerts(open_only=True) == []
    assert await app.alerts() == [acknowledged]
    assert await app.acknowledge_alert(stored.id, by="bruno") == acknowledged
    # Acknowledging does not touch the task: it waits in `error` for a retry or a cancel.
    assert (await app.get_task(task_id)).process_state is ProcessState.ERROR


async def test_a_workflow_that_fails_into_error_stores_the_alert_the_sinks_get(
    app: App, alerts: list[Alert]
) -> None:
    @app.workflow("orders.broken")
    async def broken(ctx: WorkflowContext, data: Any) -> JsonValue:
        return data["missing"]  # a bug: the task goes to `error`

    async with app.running():
        task_id = await app.submit("orders.broken", {}, key="B-1")
        await _ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was sent")

    (sent,) = alerts
    (stored,) = await app.alerts(open_only=True)
    assert (stored.task_id, stored.key, stored.reason) == (task_id, "B-1", sent.reason)
    assert stored.failure_count == sent.failure_count


async def test_bad_acknowledgements_are_refused_and_change_nothing(app: App) -> None:
    with pytest.raises(UnknownAlertError, match="unknown alert 7"):
        await app.acknowledge_alert(7, by="anna")
    with pytest.raises(ConfigError, match="'by' is empty"):
        await app.acknowledge_alert(7, by=" ")
    with pytest.raises(ConfigError, match="at least 1"):
        await app.alerts(limit=0)

    assert await app.alerts() == []
