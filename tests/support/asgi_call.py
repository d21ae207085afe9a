"""One HTTP request to an ASGI application, in process, streams included.

httpx's ASGITransport reads a response to its end, which a server-sent
events stream never reaches. `call` takes the status, the headers and the
body up to the end, or up to the first non-empty chunk of a stream, and then
tells the application the client went away (`http.disconnect`), as a browser
closing the page does. The scope carries a `state` dict the application's
requests share (`request.state`), returned with the reply, so that a test
sees what the handler recorded there.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final
from urllib.parse import quote

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.types import ASGIApp, Message

__all__ = ["Reply", "call"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the application answered, and the request's `state` after it."""

    status: int
    headers: dict[str, str]
    body: bytes
    state: dict[str, Any] = field(default_factory=dict)


async def call(
    app: ASGIApp,
    method: str,
    path: str,
    *,
    query: bytes = b"",
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    client: tuple[str, int] = ("127.0.0.1", 50_000),
    patience: float = 30.0,
) -> Reply:
    """Send one request to `app`; its reply (a stream's up to its first event).

    `path` is the decoded path (any text: the raw path is its UTF-8 percent-encoding).

    Raises:
        TimeoutError: The application did not answer within `patience` seconds (a backstop).
    """
    state: dict[str, Any] = {}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": quote(path, safe="/", errors="surrogatepass").encode("ascii"),
        "root_path": "",
        "query_string": query,
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
        "client": client,
        "server": ("127.0.0.1", 8080),
        "state": state,
    }
    gone = asyncio.Event()
    sent = False
    start: Message | None = None
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False) or chunks[-1]:
                gone.set()  # the end, or a stream's first event: the client leaves

    await asyncio.wait_for(app(scope, receive, send), patience)
    assert start is not None, f"{method} {path}: no response started"
    return Reply(
        status=start["status"],
        headers={k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", [])},
        body=b"".join(chunks),
        state=state,
    )
