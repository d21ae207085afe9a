"""The dashboard's pages and actions over a real App, on SQLite and PostgreSQL.

Requests go through the ASGI application in process (httpx's ASGITransport):
who may see what, the CSRF check, escaping, and the actions with the
operator's name in the task's history. The tests of the dashboard's own logic
(who may see what, the CSRF and origin checks, escaping) run on SQLite only;
those whose outcome the store decides (operators, retries, searches, counts,
wake-ups) on both backends. The tests that need a task in `error` run on a
FakeClock (`fake_time`): its step's window passes when they move it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from shepherd import ProcessState
from shepherd.dashboard import create_dashboard
from shepherd.dashboard.auth import COOKIE
from shepherd.dashboard.live import event_text, refreshes
from shepherd.dashboard.pages import digest
from shepherd.errors import StoreUnavailableError
from shepherd.testing import wait_until
from support import fake_time
from support.backends import sqlite_only
from support.fake_time import WINDOW

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

TOKEN = "the-shared-dashboard-token"
PATIENCE = 15.0
SCRIPT = "<script>alert(1)</script>"


def _register(app: App) -> list[JsonValue]:
    """Workflow `orders.check` and its agent; the payloads the agent has taken, so far."""
    taken: list[JsonValue] = []

    @app.agent("check")
    async def check(request: AgentRequest) -> JsonValue:
        taken.append(request.payload)
        if isinstance(request.payload, dict) and request.payload.get("ok") is False:
            await asyncio.Event().wait()  # a remote service that never answers
        return request.payload

    @app.workflow("orders.check", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("check", data, within=WINDOW)

    return taken


async def _state(app: App, task_id: str) -> ProcessState:
    return (await app.get_task(task_id)).process_state


async def _in_error(
    app: App, taken: list[JsonValue], payload: JsonValue, *, key: str | None = None
) -> str:
    """A task that ends in `error` (its step never answers; the app runs on fake time); its id."""
    task_id = await app.submit("orders.check", payload, key=key)
    await wait_until(lambda: payload in taken, timeout=PATIENCE)  # the clock stands still
    task = await fake_time.ended(app, task_id)
    assert task.process_state is ProcessState.ERROR
    return task_id


async def _is(app: App, task_id: str, state: ProcessState) -> bool:
    return await _state(app, task_id) is state


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard over `app`, protected by TOKEN."""
    await app.open()
    site = create_dashboard(app, token=TOKEN)
    transport = httpx.ASGITransport(app=site)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found[1]


async def _log_in(http: httpx.AsyncClient, token: str) -> None:
    response = await http.post("/login", data={"token": token, "next": "/"})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/"


@sqlite_only()
async def test_every_page_and_action_needs_the_token(app: App, client: httpx.AsyncClient) -> None:
    page = await client.get("/tasks")
    assert page.status_code == 303
    assert page.headers["location"] == "/login?next=%2Ftasks"
    for path in ("/live/overview", "/metrics"):
        assert (await client.get(path)).status_code == 401
    refused = await client.post("/tasks/x/cancel", data={"csrf": "x"})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    wrong = await client.get("/tasks", headers={"Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401
    assert (await client.post("/login", data={"token": "nope"})).status_code == 401
    assert COOKIE not in client.cookies


@sqlite_only()
async def test_the_cookie_holds_a_signed_name_not_the_token(
    app: App, client: httpx.AsyncClient
) -> None:
    response = await client.post("/login", data={"token": TOKEN, "next": "/tasks"})
    assert response.headers["location"] == "/tasks"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert TOKEN not in cookie
    page = await client.get("/")
    assert page.status_code == 200
    assert 'id="operator">shared-token<' in page.text
    # A forged cookie (a name signed by no one) opens nothing.
    value = client.cookies[COOKIE]
    client.cookies.set(COOKIE, value[:-4] + "AAAA")
    assert (await client.get("/tasks")).status_code == 303


@pytest.mark.fake_time
async def test_a_named_operator_retries_with_a_new_payload_and_is_recorded(
    app: App, client: httpx.AsyncClient
) -> None:
    taken = _register(app)
    anna = await app.operations.add_operator("anna")
    async with app.running():
        task_id = await _in_error(app, taken, {"ok": False})
        await _log_in(client, anna)
        page = await client.get(f"/tasks/{task_id}")
        assert page.status_code == 200
        assert 'id="state" class="state state-error">error<' in page.text
        csrf = _csrf(page.text)

        bad = await client.post(
            f"/tasks/{task_id}/retry", data={"csrf": csrf, "seq": "1", "payload": '{"ok": tru'}
        )
        assert bad.status_code == 400
        assert "malformed JSON: Expecting value: line 1 column 8" in bad.text
        assert "{&#34;ok&#34;: tru" in bad.text  # what was typed is kept, escaped
        assert await _state(app, task_id) is ProcessState.ERROR  # nothing changed

        done = await client.post(
            f"/tasks/{task_id}/retry", data={"csrf": csrf, "seq": "1", "payload": '{"ok": true}'}
        )
        assert done.status_code == 303
        assert done.headers["location"] == f"/tasks/{task_id}"
        await wait_until(lambda: _is(app, task_id, ProcessState.PROCESSED), timeout=PATIENCE)
    retried = [e.detail for e in await app.history(task_id) if e.kind == "retried"]
    assert retried == [{"seq": 1, "state": "pending", "by": "anna", "replaced": {"ok": False}}]
    page = await client.get(f"/tasks/{task_id}")
    assert '<strong class="by">anna</strong> retried' in page.text


@sqlite_only()
@pytest.mark.fake_time
async def test_an_action_without_its_csrf_token_is_refused_and_changes_nothing(
    app: App, client: httpx.AsyncClient
) -> None:
    taken = _register(app)
    async with app.running():
        task_id = await _in_error(app, taken, {"ok": False})
    await _log_in(client, TOKEN)
    for data in ({}, {"csrf": "forged"}):
        refused = await client.post(f"/tasks/{task_id}/cancel", data=data)
        assert refused.status_code == 403
        assert "CSRF" in refused.text
    assert await _state(app, task_id) is ProcessState.ERROR
    assert [e.kind for e in await app.history(task_id)].count("cancel_requested") == 0
    # A script with a Bearer token has no session to forge: no CSRF token needed.
    scripted = await httpx.AsyncClient(
        transport=client._transport, base_url="http://127.0.0.1"
    ).post(f"/tasks/{task_id}/cancel", headers={"Authorization": f"Bearer {TOKEN}"})
    assert scripted.status_code == 303
    asked = [e.detail for e in await app.history(task_id) if e.kind == "cancel_requested"]
    assert asked == [{"by": "shared-token"}]


@sqlite_only()
@pytest.mark.fake_time
async def test_a_script_tag_in_a_payload_key_or_error_is_shown_as_text(
    app: App, client: httpx.AsyncClient
) -> None:
    taken = _register(app)
    async with app.running():
        task_id = await _in_error(app, taken, {"ok": False, "note": SCRIPT}, key=SCRIPT)
    await _log_in(client, TOKEN)
    pages = [
        await client.get(f"/tasks/{task_id}"),
        await client.get("/tasks", params={"q": SCRIPT}),
        await client.get("/"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert SCRIPT not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0].text
    assert f"/tasks/{task_id}" in pages[1].text  # found by its key
    assert "script-src 'self'" in pages[0].headers["content-security-policy"]


async def test_the_task_list_filters_searches_and_pages(
    app: App, client: httpx.AsyncClient
) -> None:
    _register(app)
    ids = [await app.submit("orders.check", {"n": n}, key=f"order-{n}") for n in range(7)]
    await _log_in(client, TOKEN)
    found = await client.get("/tasks", params={"q": "order-3"})
    assert ids[3] in found.text
    assert ids[2] not in found.text
    by_id = await client.get("/tasks", params={"q": ids[5][:12]})
    assert ids[5] in by_id.text
    first = await client.get("/tasks", params={"state": "pending", "workflow": "orders.check"})
    assert all(task_id in first.text for task_id in ids)
    bad = await client.get("/tasks", params={"before": "not a cursor"})
    assert bad.status_code == 400
    assert "is not a page cursor" in bad.text
    assert (await client.get("/tasks", params={"state": "sleeping"})).status_code == 400
    assert (await client.get("/tasks", params={"from": "yesterday"})).status_code == 400


@pytest.mark.fake_time
async def test_the_overview_shows_counts_alerts_and_the_metrics(
    app: App, client: httpx.AsyncClient
) -> None:
    taken = _register(app)
    async with app.running():
        task_id = await _in_error(app, taken, {"ok": False})
        await _log_in(client, TOKEN)
        page = await client.get("/")
        assert page.status_code == 200
        assert '<span class="n" data-state="error">1</span>' in page.text
        assert f'href="/tasks/{task_id}"' in page.text  # its open alert
        assert "<svg" in page.text
        assert "leader <code>" in page.text
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200
        assert "shepherd_" in metrics.text
        (alert,) = await app.alerts(open_only=True)
        acknowledged = await client.post(
            f"/alerts/{alert.id}/acknowledge",
            data={"csrf": _csrf(page.text), "next": "https://elsewhere.example/"},
        )
        assert acknowledged.status_code == 303
        assert acknowledged.headers["location"] == "/"  # never a redirect elsewhere
    assert (await app.alerts())[0].acknowledged_by == "shared-token"


@sqlite_only()
@pytest.mark.fake_time
async def test_without_a_token_everyone_is_local_and_actions_still_need_csrf(app: App) -> None:
    taken = _register(app)
    async with app.running():
        task_id = await _in_error(app, taken, {"ok": False})
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=None))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        page = await http.get(f"/tasks/{task_id}")
        assert page.status_code == 200
        assert 'id="operator">local<' in page.text
        assert "Log out" not in page.text
        assert COOKIE in http.cookies  # a session all the same: it keys the CSRF token
        assert (await http.post(f"/tasks/{task_id}/cancel", data={})).status_code == 403
        done = await http.post(f"/tasks/{task_id}/cancel", data={"csrf": _csrf(page.text)})
        assert done.status_code == 303
        login = await http.get("/login?next=/tasks")
        assert (login.status_code, login.headers["location"]) == (303, "/tasks")
    asked = [e.detail for e in await app.history(task_id) if e.kind == "cancel_requested"]
    assert asked == [{"by": "local"}]


async def test_a_removed_operator_loses_their_session(
    app: App, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shepherd.dashboard.auth.OPERATORS_TTL", 0.0)
    ben = await app.operations.add_operator("ben")
    await _log_in(client, ben)
    assert (await client.get("/tasks")).status_code == 200
    await app.operations.remove_operator("ben")
    assert (await client.get("/tasks")).status_code == 303
    assert (
        await client.get("/tasks", headers={"Authorization": f"Bearer {ben}"})
    ).status_code == 401


async def test_the_live_stream_sends_a_part_again_only_once_it_changed(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stream renders its part again every few milliseconds, not every second: a
    # cancel of a task no role has claimed rings no wake-up, and only a render shows it.
    monkeypatch.setattr("shepherd.dashboard.live.MIN_GAP", 0.01)
    monkeypatch.setattr("shepherd.dashboard.live.INTERVAL", 0.05)
    _register(app)
    task_id = await app.submit("orders.check", {"ok": True})

    rendered = asyncio.Event()

    async def render() -> str:
        html = f"<p>{(await app.get_task(task_id)).process_state}</p>"
        rendered.set()
        return html

    events = refreshes(app.operations, render, task_id=task_id, since=digest("<p>pending</p>"))
    first = asyncio.ensure_future(anext(events))
    await asyncio.wait_for(rendered.wait(), PATIENCE)  # it has seen the task pending
    await app.cancel(task_id, by="anna")
    try:
        # Not the part the page was loaded with: the one after the change.
        assert await asyncio.wait_for(first, PATIENCE) == event_text(
            "refresh", "<p>compensating</p>"
        )
    finally:
        await events.aclose()


@sqlite_only()
async def test_a_post_from_another_sites_page_is_refused(
    app: App, client: httpx.AsyncClient
) -> None:
    elsewhere = {"Origin": "https://evil.example"}
    login = await client.post("/login", data={"token": TOKEN}, headers=elsewhere)
    assert login.status_code == 403
    assert COOKIE not in client.cookies
    await _log_in(client, TOKEN)
    page = await client.get("/")
    logout = await client.post("/logout", data={"csrf": _csrf(page.text)}, headers=elsewhere)
    assert logout.status_code == 403
    same = {"Origin": "http://127.0.0.1"}
    assert (
        await client.post("/logout", data={"csrf": _csrf(page.text)}, headers=same)
    ).status_code == 303


@sqlite_only()
async def test_a_store_that_fails_is_a_message_not_a_traceback(
    app: App, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _log_in(client, TOKEN)

    async def unavailable() -> None:
        raise StoreUnavailableError("the store cannot be reached: connection refused")

    monkeypatch.setattr(app.operations, "count_tasks", unavailable)
    page = await client.get("/")
    assert (page.status_code, page.text) == (
        503,
        "503: the store cannot be reached: connection refused\n",
    )
