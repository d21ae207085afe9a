"""The dashboard's JSON API over a real App, on SQLite and PostgreSQL.

Reads (tasks with the list's filters and pages, a task with its steps and
history, alerts) and actions (retry with a payload, cancel, acknowledge) by a
script with a Bearer token, recorded under its operator's name; refusals as
JSON with their 4xx status, changing nothing; a browser session's request
needs its CSRF token. The refusals and the session rules are the dashboard's
own logic and run on SQLite only.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import httpx
import pytest

from shepherd import ProcessState
from shepherd.dashboard import create_dashboard
from shepherd.testing import wait_until
from support.backends import sqlite_only
from support.payments import PATIENCE, TOKEN, failed_task, register, state_is

if TYPE_CHECKING:
    from shepherd import App

JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def site(app: App) -> httpx.ASGITransport:
    """The dashboard over `app`, protected by TOKEN, as a transport for clients."""
    await app.open()
    return httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))


def script_of(site: httpx.ASGITransport, token: str = TOKEN) -> httpx.AsyncClient:
    """A client sending `Authorization: Bearer token` with every request."""
    return httpx.AsyncClient(
        transport=site, base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )


async def test_a_script_reads_tasks_a_task_and_alerts(app: App, site: httpx.ASGITransport) -> None:
    register(app)
    async with app.running():
        failed = await failed_task(app, {"sku": "pen"})
        other = await failed_task(app, {"sku": "ink"})
    waiting = await app.submit("orders.pay", {"sku": "cap"}, key="order-3")
    async with script_of(site) as script:
        errors = await script.get("/api/tasks", params={"state": "error"})
        assert errors.status_code == 200
        assert errors.headers["content-type"] == "application/json"
        assert [t["id"] for t in errors.json()["tasks"]] == [other, failed]
        assert errors.json()["next"] is None
        assert errors.json()["tasks"][0]["process_state"] == "error"
        assert "steps" not in errors.json()["tasks"][0]

        first = (await script.get("/api/tasks", params={"state": "error", "limit": "1"})).json()
        assert [t["id"] for t in first["tasks"]] == [other]
        assert first["next_url"].startswith("/api/tasks?state=error&before=")
        second = (await script.get(first["next_url"])).json()
        assert [t["id"] for t in second["tasks"]] == [failed]
        by_key = (await script.get("/api/tasks", params={"q": "order-3"})).json()
        assert [t["id"] for t in by_key["tasks"]] == [waiting]

        one = await script.get(f"/api/tasks/{failed}")
        assert one.status_code == 200
        shown = one.json()
        assert (shown["task"]["id"], shown["task"]["input"]) == (failed, {"sku": "pen"})
        assert shown["task"]["error"]["traceback"].rstrip().endswith("KeyError: 'card'")
        assert [(s["seq"], s["agent"], s["state"]) for s in shown["steps"]] == [
            (1, "reserve", "completed"),
            (2, "charge", "failed"),
        ]
        assert shown["history"][0]["kind"] == "received"
        assert shown["history"][-1]["kind"] == "error"

        alerts = (await script.get("/api/alerts", params={"open": "true"})).json()["alerts"]
        assert [a["task_id"] for a in alerts] == [other, failed]
        assert alerts[0]["acknowledged_by"] is None
        of_one = (await script.get("/api/alerts", params={"task": failed})).json()["alerts"]
        assert [a["task_id"] for a in of_one] == [failed]


async def test_a_script_retries_with_a_new_payload_and_is_recorded(
    app: App, site: httpx.ASGITransport
) -> None:
    register(app)
    anna = await app.operations.add_operator("anna")
    async with app.running(), script_of(site, anna) as script:
        task_id = await failed_task(app, {"sku": "pen"})
        fixed = {"sku": "pen", "card": "4242"}
        retried = await script.post(
            f"/api/tasks/{task_id}/retry", json={"seq": 2, "payload": fixed}
        )
        assert retried.status_code == 200, retried.text
        assert retried.json()["task"]["id"] == task_id
        assert retried.json()["task"]["process_state"] == "pending"
        await wait_until(lambda: state_is(app, task_id, ProcessState.PROCESSED), timeout=PATIENCE)
        assert (await app.get_task(task_id)).result == {"charged": "4242"}

        again = await script.post(f"/api/tasks/{task_id}/retry", json={})
        assert again.status_code == 409
        assert "it is processed" in again.json()["error"]["message"]
        ended = await script.post(f"/api/tasks/{task_id}/cancel", json={})
        assert ended.status_code == 409
        assert ended.json()["error"]["type"] == "InvalidStateError"

    retries = [e.detail for e in await app.history(task_id) if e.kind == "retried"]
    assert retries == [{"seq": 2, "state": "pending", "by": "anna", "replaced": {"sku": "pen"}}]


async def test_a_script_retries_as_it_was_cancels_and_acknowledges(
    app: App, site: httpx.ASGITransport
) -> None:
    register(app)
    async with app.running(), script_of(site) as script:
        retried = await failed_task(app, {"sku": "pen"})
        cancelled = await failed_task(app, {"sku": "ink"})
        waiting = await failed_task(app, {"sku": "nib"})
        as_it_was = await script.post(f"/api/tasks/{retried}/retry", headers=JSON)
        assert as_it_was.status_code == 200
        assert as_it_was.json()["task"]["process_state"] == "pending"

        done = await script.post(f"/api/tasks/{cancelled}/cancel", json={})
        assert done.status_code == 200
        assert done.json()["task"]["process_state"] == "compensating"
        assert done.json()["task"]["cancel_requested"] is True
        await wait_until(lambda: state_is(app, cancelled, ProcessState.CANCELLED), timeout=PATIENCE)

        # The cancelled task's alert resolved itself; the one still in error is acknowledged.
        resolved = next(a for a in await app.alerts() if a.task_id == cancelled)
        assert resolved.state == "resolved"
        alert = next(a for a in await app.alerts() if a.task_id == waiting)
        acknowledged = await script.post(f"/api/alerts/{alert.id}/acknowledge", json={})
        assert acknowledged.status_code == 200
        assert acknowledged.json()["alert"]["id"] == alert.id
        assert acknowledged.json()["alert"]["acknowledged_by"] == "shared-token"

    asked = [e.detail for e in await app.history(cancelled) if e.kind == "cancel_requested"]
    assert asked == [{"by": "shared-token"}]
    undone = [s.agent for s in (await app.get_task(cancelled)).steps]
    assert undone == ["reserve", "charge", "release"]
    plain = [e.detail for e in await app.history(retried) if e.kind == "retried"]
    assert plain == [{"seq": None, "state": "pending", "by": "shared-token"}]


@sqlite_only()
async def test_refusals_are_json_with_their_status_and_change_nothing(
    app: App, site: httpx.ASGITransport
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
    pending = await app.submit("orders.pay", {"sku": "cap"})
    assert len(await app.alerts()) == 1
    history = await app.history(task_id)
    retry = f"/api/tasks/{task_id}/retry"
    refused: list[tuple[int, str, str, dict[str, str], bytes, str]] = [
        (401, "GET", "/api/tasks", {"Authorization": "Bearer nope"}, b"", "Bearer"),
        (401, "POST", retry, {"Authorization": "Basic eDp5"}, b"{}", "Bearer"),
        (400, "POST", retry, JSON, b'{"seq": 2, "payload": {"card": ', "malformed JSON"),
        (400, "POST", retry, JSON, b"[2]", "must be a JSON object"),
        (400, "POST", retry, JSON, b'{"step": 2}', "unknown field 'step'"),
        (400, "POST", retry, JSON, b'{"seq": "2"}', "seq must be a whole number"),
        (400, "POST", retry, JSON, b'{"seq": true}', "seq must be a whole number"),
        (400, "POST", retry, JSON, b'{"seq": 1e3}', "seq must be a whole number"),
        (400, "POST", retry, JSON, b'{"seq": 1000000000000000000000000000000}', "seq must be"),
        (400, "POST", retry, JSON, b'{"seq": 0}', "seq must be a whole number"),
        (400, "POST", retry, JSON, b'{"payload": {"card": "1"}}', 'give "seq" too'),
        (400, "POST", retry, JSON, b'{"seq": 2, "payload": "\\u0000"}', "NUL character"),
        (409, "POST", retry, JSON, b'{"seq": 1, "payload": {}}', "step 1 completed"),
        (409, "POST", retry, JSON, b'{"seq": 9, "payload": {}}', "step 9 missing"),
        (409, "POST", f"/api/tasks/{pending}/retry", JSON, b"", "it is pending"),
        (415, "POST", retry, {}, b'{"seq": 2}', "Content-Type: application/json"),
        (
            415,
            "POST",
            retry,
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"seq=2",
            "JSON",
        ),
        (415, "POST", f"/api/tasks/{task_id}/cancel", {}, b"", "Content-Type: application/json"),
        (404, "POST", "/api/tasks/no-such-task/retry", JSON, b"{}", "unknown task 'no-such-task'"),
        (404, "POST", "/api/tasks/%01/cancel", JSON, b"{}", "unknown task"),
        (404, "GET", "/api/tasks/no-such-task", {}, b"", "unknown task"),
        (404, "GET", f"/api/tasks/{'x' * 300}", {}, b"", "unknown task"),
        (404, "POST", "/api/alerts/999/acknowledge", JSON, b"{}", "999"),
        (404, "POST", "/api/alerts/abc/acknowledge", JSON, b"{}", "no alert has the id 'abc'"),
        (404, "POST", f"/api/alerts/{10**30}/acknowledge", JSON, b"{}", "no alert has the id"),
        (404, "GET", "/api/nothing-here", {}, b"", "Not Found"),
        (405, "GET", retry, {}, b"", "Method Not Allowed"),
        (400, "GET", "/api/tasks?state=sleeping", {}, b"", "'sleeping' is not one of"),
        (400, "GET", "/api/tasks?limit=0", {}, b"", "'limit'"),
        (400, "GET", "/api/tasks?limit=%C2%B2", {}, b"", "'limit': a whole number is needed"),
        (400, "GET", "/api/tasks?before=nope", {}, b"", "is not a page cursor"),
        (400, "GET", "/api/alerts?open=maybe", {}, b"", "open must be true or false"),
        (400, "GET", "/api/alerts?task=%00", {}, b"", "holds a NUL"),
    ]
    async with script_of(site) as script:
        for status, method, path, headers, body, message in refused:
            response = await script.request(method, path, headers=headers, content=body)
            assert response.status_code == status, (path, body, response.text)
            assert response.headers["content-type"] == "application/json", (path, body)
            error = response.json()["error"]
            assert error["status"] == status
            assert message in error["message"], (path, body, error)

    assert await state_is(app, task_id, ProcessState.ERROR)
    assert await app.history(task_id) == history
    assert (await app.alerts())[0].is_open


@sqlite_only()
async def test_a_browser_session_needs_its_csrf_token_at_the_api(
    app: App, site: httpx.ASGITransport
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
    async with httpx.AsyncClient(transport=site, base_url="http://127.0.0.1") as browser:
        assert (await browser.post("/login", data={"token": TOKEN})).status_code == 303
        assert (await browser.get(f"/api/tasks/{task_id}")).status_code == 200  # reading is safe
        page = (await browser.get(f"/tasks/{task_id}")).text
        found = re.search(r'name="csrf" value="([^"]+)"', page)
        assert found is not None
        cancel = f"/api/tasks/{task_id}/cancel"
        forged = await browser.post(cancel, json={})
        assert forged.status_code == 403
        assert "its CSRF token in X-CSRF-Token" in forged.json()["error"]["message"]
        elsewhere = {"X-CSRF-Token": found[1], "Origin": "https://evil.example"}
        assert (await browser.post(cancel, json={}, headers=elsewhere)).status_code == 403
        assert await state_is(app, task_id, ProcessState.ERROR)
        done = await browser.post(cancel, json={}, headers={"X-CSRF-Token": found[1]})
        assert done.status_code == 200
    asked = [e.detail for e in await app.history(task_id) if e.kind == "cancel_requested"]
    assert asked == [{"by": "shared-token"}]


@sqlite_only()
async def test_without_a_token_a_script_on_this_machine_acts_as_local(app: App) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=None))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as script:
        cancel = f"/api/tasks/{task_id}/cancel"
        elsewhere = await script.post(cancel, json={}, headers={"Origin": "http://evil.example"})
        assert elsewhere.status_code == 403
        assert json.loads(elsewhere.text)["error"]["status"] == 403
        done = await script.post(cancel, json={})
        assert done.status_code == 200
        assert "set-cookie" not in done.headers
    asked = [e.detail for e in await app.history(task_id) if e.kind == "cancel_requested"]
    assert asked == [{"by": "local"}]
