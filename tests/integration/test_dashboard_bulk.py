"""Triage in bulk from the dashboard: the list's reason and count, the bulk pages, the JSON API.

Requests go through the ASGI application in process, over a real App on
SQLite and PostgreSQL; the tasks in `error` are failed into it by their
owner straight through the store (no role runs: a retried task stays
`pending`, which is what is checked).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html import unescape
from typing import TYPE_CHECKING

import httpx
import pytest

from shepherd import ProcessState
from shepherd.dashboard import create_dashboard
from shepherd.store.contract import NewTask
from support.backends import sqlite_only
from support.factories import tasks_in_error

if TYPE_CHECKING:
    from shepherd import App

TOKEN = "the-shared-dashboard-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
_OWNER = "elsewhere:1:0000/s"


async def _in_error(app: App, n: int, *, workflow: str = "orders.pay") -> list[str]:
    """`n` tasks failed into `error` by their owner (each stores an alert), oldest first."""
    await app.open()
    return await tasks_in_error(
        app.store,
        n,
        workflow=workflow,
        locked_by=_OWNER,
        reason=lambda task_id: f"card of {task_id} declined\nTraceback (most recent call last):",
    )


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard over `app`, logged in with the shared token."""
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post("/login", data={"token": TOKEN, "next": "/"})
        assert response.status_code == 303
        yield http


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None
    return found[1]


def _hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, name
    return unescape(found[1])


async def test_the_list_shows_each_reason_and_the_count(
    app: App, client: httpx.AsyncClient
) -> None:
    ids = await _in_error(app, 3)
    await app.store.submit_task(NewTask(workflow="orders.pay", input={"n": 99}))

    page = await client.get("/tasks", params={"state": "error"})

    assert page.status_code == 200
    assert '<strong id="count">3</strong> matching' in page.text
    assert (
        f'<td class="reason" title="card of {ids[0]} declined">card of {ids[0]} declined</td>'
        in page.text
    )
    assert "Traceback" not in page.text  # the first line only
    every = await client.get("/tasks")
    assert '<strong id="count">4</strong>' in every.text
    searched = await client.get("/tasks", params={"q": "orders.pay-1"})
    assert '<strong id="count">1</strong>' in searched.text


async def test_retry_all_matching_confirms_the_count_then_acts_on_exactly_those(
    app: App, client: httpx.AsyncClient
) -> None:
    ids = await _in_error(app, 4)
    other = await _in_error(app, 1, workflow="users.sync")
    page = await client.get("/tasks", params={"state": "error", "workflow": "orders.pay"})
    csrf = _csrf(page.text)

    confirm = await client.post(
        "/tasks/bulk",
        data={"csrf": csrf, "action": "retry", "all": "1", "filter": _hidden(page.text, "filter")},
    )

    assert confirm.status_code == 200
    assert "Retry 4 tasks?" in confirm.text
    assert "state error, workflow orders.pay" in confirm.text
    # Meanwhile one of them is retried by someone else: it is refused, the others go on.
    await app.operations.retry(ids[0], by="ben")
    done = await client.post(
        "/tasks/bulk/confirm",
        data={"csrf": csrf, "action": "retry", "ids": _hidden(confirm.text, "ids")},
    )

    assert done.status_code == 200
    assert "Retry: 3 of 4 tasks" in done.text
    assert f"<code>{ids[0]}</code></a></td><td>it is pending, not error</td>" in done.text
    for task_id in ids:
        assert (await app.get_task(task_id)).process_state is ProcessState.PENDING
    assert (await app.get_task(other[0])).process_state is ProcessState.ERROR
    (detail,) = [e.detail for e in await app.history(ids[1]) if e.kind == "retried"]
    assert isinstance(detail, dict)
    assert (detail["by"], detail["of"]) == ("shared-token", 4)
    assert f"<code>{detail['bulk']}</code>" in done.text


async def test_acknowledging_the_ticked_tasks_alerts(app: App, client: httpx.AsyncClient) -> None:
    ids = await _in_error(app, 3)
    page = await client.get("/tasks")
    csrf = _csrf(page.text)

    confirm = await client.post(
        "/tasks/bulk",
        data={"csrf": csrf, "action": "acknowledge", "task": [ids[0], ids[2]], "filter": ""},
    )
    assert "Acknowledge the alerts of 2 tasks?" in confirm.text
    done = await client.post(
        "/tasks/bulk/confirm",
        data={"csrf": csrf, "action": "acknowledge", "ids": _hidden(confirm.text, "ids")},
    )

    assert done.status_code == 200
    assert "2 of 2 tasks" in done.text
    assert [a.task_id for a in await app.alerts(open_only=True)] == [ids[1]]


@sqlite_only()
async def test_a_bulk_page_refuses_bad_requests_and_changes_nothing(
    app: App, client: httpx.AsyncClient
) -> None:
    ids = await _in_error(app, 1)
    csrf = _csrf((await client.get("/tasks")).text)
    for data, problem in (
        ({"action": "retry"}, "no task chosen"),
        ({"action": "explode", "task": ids[0]}, "is not one of retry, acknowledge"),
        ({"action": "retry", "all": "1", "filter": "state=processed"}, "no task matches"),
        ({"action": "retry", "all": "1", "filter": "state=sleeping"}, "sleeping"),
    ):
        refused = await client.post("/tasks/bulk", data={"csrf": csrf, **data})
        assert refused.status_code == 400, data
        assert problem in refused.text
    too_many = " ".join(f"t{i}" for i in range(10_001))
    refused = await client.post(
        "/tasks/bulk/confirm", data={"csrf": csrf, "action": "retry", "ids": too_many}
    )
    assert refused.status_code == 400
    assert "more than 10,000 tasks" in refused.text
    forged = await client.post("/tasks/bulk/confirm", data={"action": "retry", "ids": ids[0]})
    assert forged.status_code == 403
    assert (await app.get_task(ids[0])).process_state is ProcessState.ERROR


async def test_the_json_api_retries_by_filter_once_per_idempotency_key(app: App) -> None:
    ids = await _in_error(app, 3)
    pending = (await app.store.submit_task(NewTask(workflow="orders.pay", input={}))).task_id
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        headers = {**BEARER, "Idempotency-Key": "nightly-17"}
        body = {"filter": {"workflow": "orders.pay"}}
        first = await http.post("/api/tasks/retry", json=body, headers=headers)
        again = await http.post("/api/tasks/retry", json=body, headers=headers)
        reused = await http.post("/api/tasks/retry", json={"task_ids": ids[:1]}, headers=headers)
        form = await http.post("/api/tasks/retry", data={"task_ids": ids[0]}, headers=BEARER)
        nobody = await http.post("/api/tasks/retry", json=body)

    assert first.status_code == 200, first.text
    reply = first.json()
    assert (reply["action"], reply["done"], reply["of"], reply["refused"]) == ("retry", 3, 3, [])
    assert sorted(reply["done_ids"]) == sorted(ids)
    assert (again.status_code, again.json()) == (200, reply)
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert reused.status_code == 422
    assert "used for another request" in reused.json()["error"]
    assert form.status_code == 415
    assert nobody.status_code == 401
    for task_id in ids:
        kinds = [e.kind for e in await app.history(task_id)]
        assert kinds.count("retried") == 1
    assert pending not in reply["done_ids"]  # a retry by filter takes the tasks in error only


async def test_the_json_api_acknowledges_the_alerts_of_named_tasks(app: App) -> None:
    ids = await _in_error(app, 2)
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        done = await http.post(
            "/api/alerts/acknowledge", json={"task_ids": [*ids, "no-such"]}, headers=BEARER
        )
        bad = [
            await http.post("/api/alerts/acknowledge", json=body, headers=BEARER)
            for body in (
                {},
                {"task_ids": ids, "filter": {}},
                {"task_ids": "x"},
                {"filter": {"colour": "red"}},
                {"filter": {"state": "sleeping"}},
                {"filter": {"created_from": "yesterday"}},
                [1, 2],
            )
        ]

    assert done.status_code == 200, done.text
    reply = done.json()
    assert (reply["done"], reply["alerts"]) == (2, 2)
    assert reply["refused"] == [{"task_id": "no-such", "reason": "no open alert"}]
    assert await app.alerts(open_only=True) == []
    assert [r.status_code for r in bad] == [400] * len(bad)
    assert all("error" in r.json() for r in bad)
