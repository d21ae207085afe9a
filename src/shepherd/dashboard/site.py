"""The dashboard as an ASGI application: `create_dashboard(app, token=...)`.

Routes (all but `/login` and `/static` behind `access.guarded`):

    GET  /                       overview          GET /live/overview     its live part (SSE)
    GET  /tasks                  the task list
    GET  /tasks/{id}             the task page     GET /live/tasks/{id}   its live part (SSE)
    POST /tasks/{id}/retry       retry (from step `seq`, with a new `payload`)
    POST /tasks/{id}/cancel      cancel (compensate)
    POST /tasks/{id}/wake        wake a sleeping task now (`ctx.sleep`)
    POST /tasks/{id}/signal      send a signal (`signal_name`, JSON `signal_payload`) (`app.signal`)
    GET  /alerts                 the alert list (`state`: open, acknowledged, resolved, all; paged)
    POST /alerts/{id}/acknowledge
    POST /tasks/bulk             the bulk actions' confirmation (ids fixed)  POST /tasks/bulk/confirm
    POST /api/tasks/retry        POST /api/alerts/acknowledge   bulk actions for scripts (JSON)
    GET  /metrics                Prometheus text (shepherd.exposition)
    GET|POST /login, POST /logout
    /api/...                     the JSON API for scripts (`dashboard.api`)

A request whose `Host` the dashboard is not known by gets 400 before any
of this (`reach`: DNS rebinding); behind a trusted proxy, its forwarded
scheme and client address are believed (uvicorn's ProxyHeadersMiddleware).
Every response carries a Content-Security-Policy that allows only the
dashboard's own script and style, so even an injected tag could not run.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from shepherd.dashboard import actions, api, api_bulk, bulk, live, login
from shepherd.dashboard.access import guarded
from shepherd.dashboard.alert_list import alert_list
from shepherd.dashboard.api_io import error_response, status_of
from shepherd.dashboard.auth import Guard, Sessions
from shepherd.dashboard.listing import task_list
from shepherd.dashboard.overview import overview
from shepherd.dashboard.reach import HostCheck, Reach
from shepherd.dashboard.task_page import task_page
from shepherd.errors import (
    ShepherdError,
    StoreDamagedError,
    StoreUnavailableError,
    UnknownTaskError,
)
from shepherd.exposition import CONTENT_TYPE, metrics_text

if TYPE_CHECKING:
    from shepherd.app import App
    from shepherd.dashboard.throttle import LoginThrottle

__all__ = ["create_dashboard"]

_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]


def create_dashboard(
    app: App,
    *,
    token: str | None,
    sessions: Sessions | None = None,
    reach: Reach | None = None,
    throttle: LoginThrottle | None = None,
) -> ASGIApp:
    """The dashboard over `app`; with `token`, every page and action needs it (or an operator's).

    The App is opened when the server starts and closed when it stops. Its
    pages read and act through `app.operations` only; `/metrics` serves the
    App's own metrics. `sessions` signs the session cookies (default: a new
    random key). `reach` says which Host names it answers to, its public URL
    and the proxies it believes (default: the loopback names only, no proxy:
    `Reach.of`); `throttle` counts failed token checks (default: `LoginThrottle()`).

    Raises:
        ConfigError: `token` is blank, or shorter than 16 characters.
    """
    reach = reach if reach is not None else Reach()
    guard = Guard(app.operations, token=token, sessions=sessions, throttle=throttle)
    operations = app.operations

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await operations.open()
        try:
            yield
        finally:
            await operations.close()

    async def metrics(_: Request) -> Response:
        return Response(await metrics_text(app), media_type=CONTENT_TYPE)

    routes = [
        Route("/", guarded(overview, page=True)),
        Route("/tasks", guarded(task_list, page=True)),
        Route("/tasks/bulk", guarded(bulk.confirm), methods=["POST"]),
        Route("/tasks/bulk/confirm", guarded(bulk.act), methods=["POST"]),
        Route("/api/tasks/retry", api.api_guarded(api_bulk.retry_tasks), methods=["POST"]),
        Route(
            "/api/alerts/acknowledge",
            api.api_guarded(api_bulk.acknowledge_alerts),
            methods=["POST"],
        ),
        Route("/tasks/{task_id}", guarded(task_page, page=True)),
        Route("/tasks/{task_id}/retry", guarded(actions.retry), methods=["POST"]),
        Route("/tasks/{task_id}/cancel", guarded(actions.cancel), methods=["POST"]),
        Route("/tasks/{task_id}/wake", guarded(actions.wake), methods=["POST"]),
        Route("/tasks/{task_id}/signal", guarded(actions.signal), methods=["POST"]),
        Route("/alerts", guarded(alert_list, page=True)),
        Route("/alerts/{alert_id:int}/acknowledge", guarded(actions.acknowledge), methods=["POST"]),
        Route("/live/overview", guarded(live.live_overview)),
        Route("/live/tasks/{task_id}", guarded(live.live_task)),
        Route("/metrics", guarded(metrics)),
        Route("/login", login.login_form, methods=["GET"]),
        Route("/login", login.log_in, methods=["POST"]),
        Route("/logout", guarded(login.log_out), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("shepherd.dashboard", "static")]), name="static"),
        *api.routes(),
    ]
    site = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={ShepherdError: _shepherd_error, HTTPException: _http_error},
    )
    site.state.guard = guard
    site.state.reach = reach
    inner: ASGIApp = site
    if reach.forwarded_allow_ips:
        # uvicorn types its scopes more narrowly than Starlette: the same ASGI callables.
        proxied = ProxyHeadersMiddleware(site, trusted_hosts=list(reach.forwarded_allow_ips))  # type: ignore[arg-type]
        inner = cast("ASGIApp", proxied)
    return _SecurityHeaders(HostCheck(inner, reach))


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


async def _http_error(request: Request, exc: Exception) -> Response:
    """A refusal (403, 404, 405, 415...): as text, or as JSON under /api/."""
    assert isinstance(exc, HTTPException)
    if _is_api(request):
        return error_response(exc.status_code, exc.detail, headers=exc.headers)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)


async def _shepherd_error(request: Request, exc: Exception) -> Response:
    """A ShepherdError no page handled (the store went away...): its message, never a traceback."""
    if _is_api(request) and isinstance(exc, ShepherdError):
        return error_response(status_of(exc), exc.message, kind=type(exc).__name__)
    status = 400
    if isinstance(exc, StoreUnavailableError | StoreDamagedError):
        status = 503
    elif isinstance(exc, UnknownTaskError):
        status = 404
    message = exc.message if isinstance(exc, ShepherdError) else type(exc).__name__
    return PlainTextResponse(f"{status}: {message}\n", status_code=status)


class _SecurityHeaders:
    """Adds the security headers (`_HEADERS`) to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)
