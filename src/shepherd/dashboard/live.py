"""Live pages: server-sent events that carry a page's live part, rendered again when it changed.

Each stream renders its fragment, sends it as a `refresh` event if it differs
from the last one sent, then waits for the store's wake-up of its channel
(rung by this process's writes, and by other processes' through the store's
wake-ups: LISTEN/NOTIFY on PostgreSQL, datagrams on SQLite) or `INTERVAL` seconds, whichever comes first — a cheap poll of a few
indexed reads; a render that takes long (the overview of a store of millions
of tasks counts them: about 70 ms over 1,000,000 on SQLite) spaces the next
ones out (`COST`). `static/live.js` puts each event's HTML into its region. A
comment line every `KEEPALIVE` seconds keeps proxies from closing an idle
stream. A stream ends when the browser goes away.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from markupsafe import escape
from starlette.responses import Response, StreamingResponse

from shepherd.dashboard import params
from shepherd.dashboard.overview import overview_context
from shepherd.dashboard.pages import digest, fragment
from shepherd.dashboard.task_page import task_context
from shepherd.errors import ConfigError, ShepherdError

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.operations import Operations

__all__ = ["INTERVAL", "event_text", "live_overview", "live_task", "refreshes"]

#: The longest wait between two renders of a live fragment, in seconds.
INTERVAL = 1.0
#: The shortest time between two renders of a stream, in seconds.
MIN_GAP = 0.2
#: A stream waits at least this many times as long as its last render took: a stream
#: costs at most about 1/COST of the process, however large the store.
COST = 10.0
#: Seconds between two keep-alive comments on a stream with nothing new.
KEEPALIVE = 15.0
_DIGEST = re.compile(r"[0-9a-f]{32}")


def event_text(kind: str, data: str) -> str:
    """One server-sent event: `event: kind` and each line of `data` as a `data:` line."""
    lines = data.replace("\r", "").split("\n")
    return f"event: {kind}\n" + "".join(f"data: {line}\n" for line in lines) + "\n"


async def refreshes(
    ops: Operations,
    render: Callable[[], Awaitable[str]],
    *,
    task_id: str | None = None,
    since: str | None = None,
) -> AsyncGenerator[str, None]:
    """The events of one stream: the fragment whenever its digest changed; a keep-alive now and then.

    It renders again when the task `task_id` changes (any task's history, when
    None), or every `INTERVAL`. `since` is the digest of the fragment the page
    was loaded with (not sent again).
    """
    last = since
    quiet_since = time.monotonic()
    while True:
        wake = ops.changed(task_id=task_id)
        started = time.monotonic()
        try:
            html = await render()
        except ShepherdError as exc:  # the store is down for a moment: say so, keep trying
            html = f'<p class="problem">{escape(exc.message)}</p>'
        current = digest(html)
        if current != last:
            last = current
            quiet_since = time.monotonic()
            yield event_text("refresh", html)
        elif time.monotonic() - quiet_since > KEEPALIVE:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
        # Never more often than MIN_GAP (a burst of writes costs one render), nor than
        # COST times what a render takes (the overview counts every task of the store).
        floor = max(MIN_GAP, (time.monotonic() - started) * COST)
        await asyncio.sleep(floor)
        await ops.wait_changed(wake, max(INTERVAL - floor, 0.0))


def _stream(events: AsyncIterator[str]) -> Response:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def live_overview(request: Request) -> Response:
    """GET /live/overview: the overview's live part as server-sent events."""
    ops: Operations = request.app.state.guard.operations

    async def render() -> str:
        return fragment(request, "overview_live.html", **await overview_context(ops))

    return _stream(refreshes(ops, render, since=since(request)))


async def live_task(request: Request) -> Response:
    """GET /live/tasks/{id}: the task page's live part as server-sent events."""
    ops: Operations = request.app.state.guard.operations
    task_id = params.task_id(request)
    await ops.get_task(task_id)  # an unknown task is a 404, not a stream of "unknown task"

    async def render() -> str:
        return fragment(request, "task_live.html", **await task_context(ops, task_id))

    return _stream(refreshes(ops, render, task_id=task_id, since=since(request)))


def since(request: Request) -> str | None:
    """The `since` of a stream's URL: the digest of the part the page was loaded with.

    Raises:
        ConfigError: It is not a digest (`pages.digest`: 32 hex digits).
    """
    found = params.text(request, request.query_params, "since", limit=60)
    if found is not None and not _DIGEST.fullmatch(found):
        raise ConfigError("since", f"{found[:40]!r} is not a digest of a page's live part")
    return found
