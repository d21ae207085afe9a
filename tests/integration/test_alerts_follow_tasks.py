"""An alert follows its task, end to end: raised once per task, raised again by a repeated failure,
resolved when the retried task is processed, and the resolution POSTed to a real webhook.

An App running every role, with a webhook sink served by a real HTTP server
(uvicorn, in a thread), on SQLite and PostgreSQL: a workflow with a bug fails
its task into `error`, an operator retries it (still broken: it fails again),
fixes the bug and retries again; the task is processed. The store then holds
one alert, raised twice and resolved by `task processed`, and the webhook got
two `firing` alerts and one `resolved`, sent by the supervisor's leader.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shepherd import App, ProcessState, TaskFailedError
from shepherd.core.alerts import AlertState
from shepherd.testing import wait_until
from support.http_service import serve

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
#: Short periods on real time: the supervisor's leader scans (and tells resolutions) often.
PERIODS: dict[str, Any] = {"supervisor_interval": 0.1, "poll_interval": 0.05, "lease_ttl": 1.0}


@pytest.fixture
def received() -> list[dict[str, Any]]:
    """The JSON bodies the webhook received, in order."""
    return []


@pytest.fixture
def webhook(received: list[dict[str, Any]]) -> Iterator[str]:
    """The URL of a real webhook receiver that records each body."""

    async def hook(request: Request) -> Response:
        received.append(await request.json())
        return JSONResponse({"ok": True})

    with serve(Starlette(routes=[Route("/hook", hook, methods=["POST"])])) as base_url:
        yield f"{base_url}/hook"


@pytest.fixture
async def hooked(store_url: str, webhook: str) -> AsyncIterator[App]:
    """An app whose alerts go to the webhook (and nowhere else)."""
    app = App(store_url, alerts=[webhook], sqlite_synchronous="NORMAL", **PERIODS)
    try:
        yield app
    finally:
        await app.close()


async def _ended(app: App, task_id: str) -> ProcessState:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return (await app.get_task(task_id)).process_state


async def test_a_task_failed_twice_then_processed_has_one_alert_resolved_and_told_to_the_webhook(
    hooked: App, received: list[dict[str, Any]]
) -> None:
    app = hooked
    broken = {"now": True}

    @app.workflow("orders.pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        if broken["now"]:
            raise KeyError("card")  # a bug: the task goes to `error`
        return {"paid": data["amount"]}

    def firing() -> list[dict[str, Any]]:
        return [body for body in received if body["status"] == "firing"]

    async with app.running():
        task_id = await app.submit("orders.pay", {"amount": 12}, key="A-1")
        assert await _ended(app, task_id) is ProcessState.ERROR
        await wait_until(lambda: len(firing()) == 1, timeout=PATIENCE, message="no alert sent")

        await app.retry(task_id, by="anna")  # not fixed yet: it fails again
        await wait_until(lambda: len(firing()) == 2, timeout=PATIENCE, message="no second alert")
        assert await _ended(app, task_id) is ProcessState.ERROR
        (alert,) = await app.alerts()
        assert (alert.state, alert.times_raised, alert.task_id) == (AlertState.OPEN, 2, task_id)

        broken["now"] = False
        await app.retry(task_id, by="anna")
        assert await _ended(app, task_id) is ProcessState.PROCESSED
        await wait_until(
            lambda: any(body["status"] == "resolved" for body in received),
            timeout=PATIENCE,
            message="the webhook was never told of the resolution",
        )

        # Marked sent once the webhook has answered: a moment after it received the body.
        async def all_sent() -> bool:
            return await app.store.unsent_resolutions() == []

        await wait_until(all_sent, timeout=PATIENCE, message="the resolution stays unsent")

    (alert,) = await app.alerts()
    assert (alert.state, alert.resolved_by) == (AlertState.RESOLVED, "task processed")
    assert alert.resolved_at is not None
    assert await app.operations.count_alerts(state="open") == 0
    assert await app.store.unsent_resolutions() == []
    (resolution,) = [body for body in received if body["status"] == "resolved"]
    assert resolution == {
        "status": "resolved",
        "task_id": task_id,
        "workflow": "orders.pay",
        "key": "A-1",
        "reason": alert.reason,
        "failure_count": alert.failure_count,
        "at": alert.resolved_at.isoformat(),
        "alert_id": alert.id,
        "resolved_at": alert.resolved_at.isoformat(),
        "resolved_by": "task processed",
    }
    assert [body["task_id"] for body in firing()] == [task_id, task_id]
