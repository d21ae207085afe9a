"""The dashboard's alerts: the overview's true count of open alerts, and the paged alert list.

Requests go through the ASGI application in process (httpx's ASGITransport),
over a real App on SQLite and PostgreSQL. The alerts are made through the
store, as an owner failing tasks into `error` makes them: no role runs.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
import pytest

from shepherd.core.states import ProcessState
from shepherd.dashboard import create_dashboard
from shepherd.store.contract import NewTask

if TYPE_CHECKING:
    from shepherd import App

TOKEN = "the-shared-dashboard-token"
OWNER = "elsewhere:1:0000/s"


async def _in_error(app: App, count: int) -> list[str]:
    """`count` tasks failed into `error` by their owner, each with its alert; their ids, oldest first."""
    store = app.store
    ids = []
    for n in range(count):
        task_id = (await store.submit_task(NewTask(workflow="orders.pay", input={}))).task_id
        (claimed,) = await store.claim_tasks(locked_by=OWNER, limit=1)
        await store.fail_task(
            task_id,
            locked_by=OWNER,
            epoch=claimed.lock_epoch,
            state=ProcessState.ERROR,
            error={"reason": f"card {n} declined"},
        )
        ids.append(task_id)
    return ids


@pytest.fixture
async def client(app: App) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the dashboard over `app`, logged in with TOKEN."""
    await app.open()
    site = create_dashboard(app, token=TOKEN)
    transport = httpx.ASGITransport(app=site)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post("/login", data={"token": TOKEN, "next": "/"})
        assert response.status_code == 303, response.text
        yield http


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found[1]


def _rows(html: str) -> list[str]:
    """The task ids of the alert list's rows, in order."""
    return re.findall(r'<tr class="alert-\w+">\s*<td>\d+</td>.*?href="/tasks/(\w+)"', html, re.S)


def _link(html: str, rel: str) -> str:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', html)
    assert found is not None, f"the page has no {rel} link"
    return found[1].replace("&amp;", "&")


async def test_the_overview_counts_every_open_alert_and_links_to_the_list(
    app: App, client: httpx.AsyncClient
) -> None:
    await _in_error(app, 23)

    page = await client.get("/")

    assert page.status_code == 200
    assert '<span id="open-alerts">23</span> · the newest 20 shown' in page.text
    assert 'href="/alerts?state=open"' in page.text


async def test_the_alert_list_pages_through_every_alert_and_acknowledges_one(
    app: App, client: httpx.AsyncClient
) -> None:
    ids = await _in_error(app, 53)
    newest_first = ids[::-1]

    first = await client.get("/alerts")  # the open ones by default
    assert first.status_code == 200
    assert '<small id="alert-count">53 open</small>' in first.text
    assert _rows(first.text) == newest_first[:50]
    assert 'rel="prev"' not in first.text
    second = await client.get(_link(first.text, "next"))
    assert _rows(second.text) == newest_first[50:]
    assert 'rel="next"' not in second.text
    back = await client.get(_link(second.text, "prev"))
    assert _rows(back.text) == newest_first[:50]

    here = _link(first.text, "next")
    (alert,) = await app.alerts(task_id=newest_first[51])
    acknowledged = await client.post(
        f"/alerts/{alert.id}/acknowledge", data={"csrf": _csrf(second.text), "next": here}
    )
    assert acknowledged.status_code == 303
    assert acknowledged.headers["location"] == here
    assert _rows((await client.get(here)).text) == [newest_first[50], newest_first[52]]
    only = await client.get("/alerts", params={"state": "acknowledged"})
    assert _rows(only.text) == [newest_first[51]]
    assert '<strong class="by">shared-token</strong>' in only.text
    assert "Acknowledge</button>" not in only.text
    every = await client.get("/alerts", params={"state": "all"})
    assert '<small id="alert-count">53 in all</small>' in every.text


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"state": "closed"}, "is not one of open, acknowledged, resolved, all"),
        ({"before": "²"}, "a page&#39;s cursor is an alert&#39;s id"),
        ({"after": "-1"}, "a page&#39;s cursor is an alert&#39;s id"),
        ({"before": "1" + "0" * 30}, "a page&#39;s cursor is an alert&#39;s id"),
        ({"before": str(2**63)}, "a page&#39;s cursor is an alert&#39;s id"),
        ({"before": "5", "after": "2"}, "not both"),
    ],
)
async def test_a_bad_filter_or_cursor_is_a_400_that_names_it(
    app: App, client: httpx.AsyncClient, query: dict[str, str], problem: str
) -> None:
    page = await client.get("/alerts", params=query)

    assert page.status_code == 400
    assert problem in page.text
