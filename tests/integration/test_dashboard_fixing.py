"""The task page of a task in `error`, for the operator who fixes it, over a real App.

The failure, its whole traceback and the retry form come before the steps;
the form's box holds the failed step's payload, that step chosen; Cancel says
what it undoes; the counters say what they count; a retry's replaced payload
is kept in the history and shown. A JSON body sent to a form route is refused
(415) and changes nothing. Requests go through the ASGI application in process.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
import pytest
from markupsafe import escape

from shepherd import ProcessState
from shepherd.dashboard import create_dashboard
from shepherd.testing import wait_until
from support.backends import sqlite_only
from support.payments import PATIENCE, TOKEN, failed_task, register, state_is

if TYPE_CHECKING:
    from shepherd import App

BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard over `app`, logged in with the shared token."""
    await app.open()
    transport = httpx.ASGITransport(app=create_dashboard(app, token=TOKEN))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post("/login", data={"token": TOKEN, "next": "/"})
        assert response.status_code == 303
        yield http


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found[1]


@sqlite_only()
async def test_the_failure_its_whole_traceback_and_the_filled_form_come_first(
    app: App, client: httpx.AsyncClient
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen", "note": "<b>gift</b>"})
    task = await app.get_task(task_id)
    traceback = task.error["traceback"] if isinstance(task.error, dict) else None
    assert isinstance(traceback, str)
    assert len(traceback) > 300
    assert len(traceback.splitlines()) > 12

    page = (await client.get(f"/tasks/{task_id}")).text

    order = [
        page.index(mark) for mark in ('id="failure"', 'id="retry"', 'id="cancel"', "<h2>Steps")
    ]
    assert order == sorted(order)
    assert 'id="reason">' in page
    assert "KeyError: &#39;card&#39;" in page
    # The traceback whole, as lines (never a JSON string with \n escapes), behind an expander.
    failure = page[page.index('id="failure"') : page.index('id="actions"')]
    assert str(escape(traceback.rstrip("\n"))) in failure
    assert "\\n" not in failure
    start = "\n".join(traceback.splitlines()[:12])
    assert f"<summary><pre>{escape(start)}</pre>" in failure
    assert f"the whole traceback ({len(traceback.rstrip().splitlines())} lines)" in failure
    # The counters say what they count.
    assert 'the agent tried <strong id="tries">2</strong> times' in failure
    assert "task failures <strong>0</strong>" in failure
    assert "a step's tries do not count here" in failure
    # The form: the failed step chosen, its payload in the box, pretty-printed.
    pretty = json.dumps({"sku": "pen", "note": "<b>gift</b>"}, indent=2)
    assert re.search(r'<option value="2" data-payload="[^"]*" selected>#2 charge<', page)
    assert f'spellcheck="false">{escape(pretty)}</textarea>' in page
    # Cancel looks destructive and says what it undoes.
    assert '<button type="submit" class="danger"' in page
    assert "Cancelling undoes, newest first:" in page
    assert "<strong>#1 reserve</strong> (by release)." in page
    assert "Cancel task and undo 1 step" in page


@sqlite_only()
async def test_a_refused_retry_keeps_what_was_typed_and_chosen(
    app: App, client: httpx.AsyncClient
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
    page = (await client.get(f"/tasks/{task_id}")).text

    refused = await client.post(
        f"/tasks/{task_id}/retry", data={"csrf": csrf_of(page), "seq": "", "payload": '{"a": 1}'}
    )

    assert refused.status_code == 400
    assert "a new payload needs the step it replaces" in refused.text
    assert '<option value="" data-payload="" selected>' in refused.text
    assert 'spellcheck="false">{&#34;a&#34;: 1}</textarea>' in refused.text


async def test_a_retry_from_the_filled_form_keeps_the_payload_it_replaced(
    app: App, client: httpx.AsyncClient
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
        page = (await client.get(f"/tasks/{task_id}")).text
        corrected = '{"sku": "pen", "card": "4242"}'
        done = await client.post(
            f"/tasks/{task_id}/retry",
            data={"csrf": csrf_of(page), "seq": "2", "payload": corrected},
        )
        assert done.status_code == 303
        await wait_until(lambda: state_is(app, task_id, ProcessState.PROCESSED), timeout=PATIENCE)

    retried = [e.detail for e in await app.history(task_id) if e.kind == "retried"]
    assert retried == [
        {"seq": 2, "state": "pending", "by": "shared-token", "replaced": {"sku": "pen"}}
    ]
    page = (await client.get(f"/tasks/{task_id}")).text
    history = page[page.index('<table class="history">') :]
    assert "the payload it replaced" in history
    assert "{&#34;sku&#34;: &#34;pen&#34;}" in history
    assert 'id="failure"' not in page  # processed: nothing to fix
    assert 'id="retry"' not in page


@sqlite_only()
async def test_a_json_body_to_a_form_route_is_refused_and_changes_nothing(
    app: App, client: httpx.AsyncClient
) -> None:
    register(app)
    async with app.running():
        task_id = await failed_task(app, {"sku": "pen"})
    (alert,) = await app.alerts(open_only=True)
    before = await app.history(task_id)
    script = httpx.AsyncClient(transport=client._transport, base_url="http://127.0.0.1")
    page = (await client.get(f"/tasks/{task_id}")).text
    body = json.dumps({"seq": 2, "payload": {"sku": "pen", "card": "4242"}})
    sent: list[tuple[httpx.AsyncClient, str, dict[str, str]]] = [
        (script, f"/tasks/{task_id}/retry", {**BEARER, "Content-Type": "application/json"}),
        (script, f"/tasks/{task_id}/cancel", {**BEARER, "Content-Type": "application/json"}),
        (script, f"/alerts/{alert.id}/acknowledge", {**BEARER, "Content-Type": "text/plain"}),
        (script, f"/tasks/{task_id}/retry", BEARER),  # no type at all, and a body
        (client, f"/tasks/{task_id}/cancel", {"Content-Type": "application/json"}),
        (script, "/login", {"Content-Type": "application/json"}),
    ]

    for http, path, headers in sent:
        refused = await http.post(path, content=body, headers=headers)
        assert refused.status_code == 415, (path, refused.text)
        assert "this route takes a form" in refused.text
    # Even with the CSRF token in its header, a browser's JSON is not read as a form.
    csrf = {"Content-Type": "application/json", "X-CSRF-Token": csrf_of(page)}
    assert (
        await client.post(f"/tasks/{task_id}/retry", content=body, headers=csrf)
    ).status_code == 415

    assert await state_is(app, task_id, ProcessState.ERROR)
    assert await app.history(task_id) == before
    assert [a.id for a in await app.alerts(open_only=True)] == [alert.id]
    # A form, and a script's POST without a body, are still what these routes take.
    assert (await script.post(f"/tasks/{task_id}/retry", headers=BEARER)).status_code == 303
