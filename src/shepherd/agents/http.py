"""Agents that call an HTTP service: the common case in a few lines.

    from shepherd.agents.http import http_agent

    http_agent(app, "payments.charge", "POST", "http://payments/charges",
               within=5, retry=RetryPolicy(max_attempts=5))

The step's payload is sent as the JSON body, with `Idempotency-Key` (the same
for every execution of the step) and `X-Shepherd-Attempt`. As an `undo=`
agent it sends the undo's payload, which names the step it undoes by that
step's key (`idempotency_key`, with `outcome`: `completed` or `unknown`) in
the body; the header is then the undo's own key. The outcome maps onto
shepherd's failure model:

- 2xx: the JSON body (or the text, or None when empty) is the step's result;
- 429, 502, 503, 504: `HTTPTransientError`, retried inside `complete_by`, no
  sooner than the service's `Retry-After` (seconds or an HTTP date);
- a connection refused, reset or dropped, or an httpx timeout:
  `HTTPTransientError` too;
- any other status: `HTTPPermanentError`, whose message holds the status and
  the service's own message, so it is what the workflow and the task's error see.

At `complete_by` the agent cancels the call (the request is aborted) and
replies nothing, like any handler. One `httpx.AsyncClient` per App is shared by
every call; `app.close()` closes it.

For anything the one-liner does not cover (a URL built from the payload, query
parameters, a body reshaped), register your own handler and use `call_http`:

    @app.agent("payments.refund")
    async def refund(request: AgentRequest) -> JsonValue:
        charge = request.payload["result"]["id"]
        return await call_http(app, request, "POST", f"{PAYMENTS}/charges/{charge}/refund")
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

import httpx

from shepherd.errors import PermanentError, TransientError

if TYPE_CHECKING:
    from shepherd.agents.agent import Handler
    from shepherd.agents.request import AgentRequest
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.records import JsonValue
    from shepherd.core.retry import RetryPolicy

__all__ = [
    "TRANSIENT_STATUSES",
    "AgentHost",
    "HTTPPermanentError",
    "HTTPTransientError",
    "call_http",
    "http_agent",
    "http_client",
    "parse_retry_after",
]

#: Statuses worth asking again: the service is overloaded or a proxy lost it.
TRANSIENT_STATUSES: Final = frozenset({429, 502, 503, 504})

#: How much of a service's error message is kept in the error (characters).
MESSAGE_LIMIT: Final = 500

#: The shared client's timeouts. Only connecting is bounded here: how long the
#: whole call may take is the step's `complete_by`, at which the agent cancels it.
DEFAULT_TIMEOUT: Final = httpx.Timeout(None, connect=10.0)


class AgentHost(Protocol):
    """What these helpers use of an App: `agent` to register, `on_close` to close the client."""

    on_close: list[Callable[[], Awaitable[object]]]

    def agent(
        self,
        name: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        within: float | None = None,
        breaker: BreakerPolicy | None = None,
        service: str | None = None,
        resource: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register a handler as agent `name` (`App.agent`)."""
        ...


_clients: weakref.WeakKeyDictionary[AgentHost, httpx.AsyncClient] = weakref.WeakKeyDictionary()


class HTTPTransientError(TransientError):
    """The HTTP service is unavailable for now; worth retrying."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        #: The response status, or None when no response came (connection, timeout).
        self.status = status
        #: Seconds the service asked us to wait (`Retry-After`), read by the agent.
        self.retry_after = retry_after
        super().__init__(message)


class HTTPPermanentError(PermanentError):
    """The HTTP service refused the request; asking again will not help."""

    def __init__(self, message: str, *, status: int, detail: Any = None) -> None:
        #: The response status.
        self.status = status
        super().__init__(message, detail=detail)


def http_client(app: AgentHost) -> httpx.AsyncClient:
    """The App's shared client, created on first use and closed by `app.close()`.

    Call it from the event loop the App runs on (the client belongs to it).
    """
    client = _clients.get(app)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, follow_redirects=False)
        _clients[app] = client
        app.on_close.append(lambda: _close(app, client))
    return client


async def _close(app: AgentHost, client: httpx.AsyncClient) -> None:
    if _clients.get(app) is client:
        del _clients[app]
    await client.aclose()


def http_agent(
    app: AgentHost,
    name: str,
    method: str,
    url: str,
    *,
    within: float | None = None,
    retry: RetryPolicy | None = None,
    headers: Mapping[str, str] | None = None,
    breaker: BreakerPolicy | None = None,
    service: str | None = None,
    resource: str | None = None,
) -> Handler:
    """Register agent `name`, which sends its payload to `method url` as JSON.

    Args:
        app: The App to register the agent on (and whose shared client it uses).
        name: The agent's name, as workflows `ctx.call` it.
        method: The HTTP method, such as "POST".
        url: The absolute URL.
        within: Default seconds a call to this agent may take (see `App.agent`).
        retry: How transient failures are retried inside `complete_by`.
        headers: Extra headers for every call (authentication, say).
        breaker: A circuit breaker for the service, shared by every process.
        service: The service's name for its breaker (default: the URL's host and
            port, so that agents calling one service share one breaker).
        resource: The constrained resource behind the service: a call holds one
            of its `capacity` slots (see `App.agent`).

    Returns:
        The registered handler.

    Raises:
        ConfigError: `within` is not a positive number.
    """

    async def handler(request: AgentRequest) -> JsonValue:
        return await call_http(app, request, method, url, json=request.payload, headers=headers)

    handler.__name__ = handler.__qualname__ = f"http_agent[{name}]"
    if breaker is not None and service is None:
        parsed = httpx.URL(url)
        service = f"{parsed.host}:{parsed.port}" if parsed.port else parsed.host
    app.agent(
        name,
        retry=retry,
        within=within,
        breaker=breaker,
        service=service or None,
        resource=resource,
    )(handler)
    return handler


async def call_http(
    app: AgentHost,
    request: AgentRequest,
    method: str,
    url: str,
    *,
    json: JsonValue = None,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JsonValue:
    """Make one HTTP call for `request` and map its outcome for the agent.

    Args:
        app: The App whose shared client to use.
        request: The request the handler received: its idempotency key and
            attempt are sent as `Idempotency-Key` and `X-Shepherd-Attempt`.
        method: The HTTP method.
        url: The absolute URL.
        json: The JSON body; no body when None.
        params: Query parameters.
        headers: Extra headers; they cannot replace the two above.

    Returns:
        The 2xx response's JSON body, its text when it is not JSON, or None
        when it is empty.

    Raises:
        HTTPTransientError: 429, 502, 503 or 504 (with the parsed `Retry-After`),
            or the connection failed, broke or timed out.
        HTTPPermanentError: Any other status that is not 2xx.
    """
    sent = httpx.Headers(headers)  # case-insensitive: ours replace any spelling of theirs
    sent["Idempotency-Key"] = request.idempotency_key
    sent["X-Shepherd-Attempt"] = str(request.attempt)
    client = http_client(app)
    target = f"{method.upper()} {url}"
    try:
        if json is None:
            response = await client.request(method, url, params=params, headers=sent)
        else:
            response = await client.request(method, url, json=json, params=params, headers=sent)
    except httpx.TransportError as exc:
        raise HTTPTransientError(f"{target}: {_describe(exc)}") from exc
    return _outcome(target, response)


def _outcome(target: str, response: httpx.Response) -> JsonValue:
    status = response.status_code
    if 200 <= status < 300:
        return _body(response)
    said = _server_message(response)
    message = f"{target} -> HTTP {status} {response.reason_phrase}".rstrip()
    if said:
        message = f"{message}: {said}"
    if status in TRANSIENT_STATUSES:
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        raise HTTPTransientError(message, status=status, retry_after=retry_after)
    raise HTTPPermanentError(
        message, status=status, detail={"status": status, "body": _truncate(response.text)}
    )


def _body(response: httpx.Response) -> JsonValue:
    if not response.content:
        return None
    if "json" in response.headers.get("content-type", ""):
        try:
            value: JsonValue = response.json()
        except ValueError:
            return response.text
        return value
    return response.text


def _server_message(response: httpx.Response) -> str:
    """What the service said: a JSON "message", "error" or "detail", else the body."""
    text = response.text.strip()
    try:
        body = json.loads(text) if text else None
    except ValueError:
        return _truncate(text)
    if isinstance(body, dict):
        for field in ("message", "error", "detail"):
            value = body.get(field)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                value = value["message"]
            if isinstance(value, str) and value.strip():
                return _truncate(value.strip())
    return _truncate(text)


def _truncate(text: str) -> str:
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _describe(exc: httpx.TransportError) -> str:
    said = str(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """A `Retry-After` header in seconds from `now`, or None when absent or unreadable.

    Args:
        value: The header: delay-seconds ("120") or an HTTP date
            ("Wed, 21 Oct 2015 07:28:00 GMT").
        now: The present, for a date (default: the system's UTC time).

    Returns:
        Seconds to wait, at least 0.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322
        when = when.replace(tzinfo=UTC)
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None
