"""The JSON API for scripts: read tasks and alerts, retry, cancel and acknowledge, as JSON.

    GET  /api/tasks                      a page of tasks (the task list's filters), `next` to go on
    GET  /api/tasks/{id}                 a task, its steps and its history
    GET  /api/alerts                     alerts, newest first (`open`, `task`, `limit`)
    POST /api/tasks/{id}/retry           body {"seq": n, "payload": ...}, both optional
    POST /api/tasks/{id}/cancel          body {} (or none)
    POST /api/alerts/{id}/acknowledge    body {} (or none)

Who may call it is decided as for the pages (`Guard.identify`): a script
sends `Authorization: Bearer TOKEN` (the shared token or an operator's), and
is recorded as who acts. A Bearer request needs no CSRF token: no cookie is
involved, and a browser never adds that header on its own. A request that
comes with the browser's session cookie instead must send its session's
CSRF token in `X-CSRF-Token`, and a browser's `Origin` must be this
dashboard, or the action is refused (403). Without a configured token
(loopback only), a request without a cookie acts as `local`, like a page.
Every action's body is JSON (`Content-Type: application/json`, 415
otherwise): a page of another site cannot send that type without a CORS
preflight, which the dashboard never grants.

Answers are JSON; a refusal is `{"error": {"status", "type", "message"}}`
with its status: 400 bad JSON or field, 401 no or bad token, 403 CSRF or
origin, 404 unknown task or alert, 409 the task's state does not allow it,
413 a body too large, 415 not JSON. A refused action changes nothing.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shepherd.dashboard import params
from shepherd.dashboard.access import Endpoint, admit, check_origin
from shepherd.dashboard.api_io import (
    LARGEST,
    ApiError,
    error_response,
    event_json,
    json_body,
    number,
    status_of,
    step_json,
    task_json,
)
from shepherd.dashboard.listing import PAGE, Filters, page_of_tasks
from shepherd.errors import ConfigError, ShepherdError

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.dashboard.auth import Guard, Identity
    from shepherd.operations import Operations

__all__ = ["CSRF_HEADER", "api_guarded", "routes"]

#: The header a browser session's API request carries its CSRF token in.
CSRF_HEADER = "x-csrf-token"
#: The most tasks one page of `GET /api/tasks` lists, and alerts `GET /api/alerts`.
MOST_TASKS = 500
MOST_ALERTS = 1000


def api_guarded(endpoint: Endpoint) -> Endpoint:
    """`endpoint` for identified callers only, its refusals as JSON (see the module's docstring)."""

    async def door(request: Request) -> Response:
        guard: Guard = request.app.state.guard
        who, wait = await admit(request)
        if wait:
            return error_response(
                429,
                f"too many wrong tokens from your address; try again in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        if who is None:
            return error_response(
                401,
                "send Authorization: Bearer TOKEN (the dashboard's token or an operator's)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        request.state.who = who
        try:
            if request.method not in ("GET", "HEAD"):
                _check_session(request, guard, who)
            params.mark(request)  # the handler's own checks begin
            return await endpoint(request)
        except ApiError as exc:
            return error_response(exc.status, exc.message)
        except HTTPException as exc:
            return error_response(exc.status_code, exc.detail.partition(": ")[2] or exc.detail)
        except ShepherdError as exc:
            return error_response(status_of(exc), exc.message, kind=type(exc).__name__)

    return door


def _check_session(request: Request, guard: Guard, who: Identity) -> None:
    """A browser's action: its Origin must be this site, its session cookie needs its CSRF token.

    Raises:
        ApiError: 403 when a session's request lacks its CSRF token.
        HTTPException: 403 when a browser's `Origin` names another site.
    """
    if who.session is None:  # Bearer: no cookie involved, nothing to forge
        return
    check_origin(request)
    if who.cookie is not None:  # no cookie was sent (no token configured): nothing to ride on
        return
    sent = request.headers.get(CSRF_HEADER, "")
    expected = guard.sessions.csrf(who.session)
    if not hmac.compare_digest(sent.encode(), expected.encode()):
        raise ApiError(
            403,
            "a request with the session cookie needs its CSRF token in X-CSRF-Token; "
            "scripts send Authorization: Bearer TOKEN instead",
        )


def _ops(request: Request) -> Operations:
    ops: Operations = request.app.state.guard.operations
    return ops


async def list_tasks(request: Request) -> Response:
    """GET /api/tasks: `state` (repeated), `workflow`, `key`, `q`, `from`, `to`, `before`, `limit`."""
    query = request.query_params
    limit = params.whole(request, query, "limit", low=1, high=MOST_TASKS) or PAGE
    try:
        filters = Filters.parse(query, request=request)
    except ConfigError as exc:
        raise ApiError(400, exc.message) from None
    tasks, cursor = await page_of_tasks(_ops(request), filters, limit=limit)
    next_page = None if cursor is None else cursor.encode()
    link = None if cursor is None else "/api" + filters.link(before=cursor)
    return JSONResponse(
        {"tasks": [task_json(t) for t in tasks], "next": next_page, "next_url": link}
    )


async def get_task(request: Request) -> Response:
    """GET /api/tasks/{id}: the task, its steps and its history (oldest first)."""
    ops = _ops(request)
    task_id = params.task_id(request)
    task = await ops.get_task(task_id)
    history = await ops.history(task_id)
    return JSONResponse(
        {
            "task": task_json(task),
            "steps": [step_json(s) for s in task.steps],
            "history": [event_json(e) for e in history],
        }
    )


async def list_alerts(request: Request) -> Response:
    """GET /api/alerts: `open` (true or false), `task` (its id), `limit` (1 to MOST_ALERTS)."""
    query = request.query_params
    opened = (query.get("open") or "false").strip().lower()
    if opened not in ("true", "false", "1", "0", "yes", "no"):
        raise ApiError(400, f"open must be true or false, not {opened[:20]!r}")
    alerts = await _ops(request).alerts(
        open_only=opened in ("true", "1", "yes"),
        limit=params.whole(request, query, "limit", low=1, high=MOST_ALERTS) or 100,
        task_id=params.text(request, query, "task"),
    )
    return JSONResponse({"alerts": [alert.to_json() for alert in alerts]})


async def retry(request: Request) -> Response:
    """POST /api/tasks/{id}/retry: from its failed step, or from step `seq` (with a new `payload`).

    A `payload` absent or null keeps the step's own; a payload needs its `seq`.
    """
    task_id = params.task_id(request)
    body = await json_body(request, fields=("seq", "payload"))
    seq = None if body.get("seq") is None else number(body["seq"], "seq", high=2**31 - 1)
    payload = body.get("payload")
    if payload is not None and seq is None:
        raise ApiError(400, 'a new payload needs the step it replaces: give "seq" too')
    who: Identity = request.state.who
    task = await _ops(request).retry(task_id, seq=seq, payload=payload, by=who.operator)
    return JSONResponse({"task": task_json(task)})


async def cancel(request: Request) -> Response:
    """POST /api/tasks/{id}/cancel: compensate the task, then it ends `cancelled`."""
    task_id = params.task_id(request)
    await json_body(request, fields=())
    who: Identity = request.state.who
    task = await _ops(request).cancel(task_id, by=who.operator)
    return JSONResponse({"task": task_json(task)})


async def acknowledge(request: Request) -> Response:
    """POST /api/alerts/{id}/acknowledge: the alert, acknowledged by who asks (the first one stays)."""
    text = request.path_params["alert_id"]
    try:
        alert_id = params.whole(request, request.path_params, "alert_id", low=1, high=LARGEST)
    except ConfigError:
        raise ApiError(404, f"no alert has the id {text[:40]!r}") from None
    if alert_id is None:
        raise ApiError(404, "no alert has an empty id")
    await json_body(request, fields=())
    who: Identity = request.state.who
    alert = await _ops(request).acknowledge_alert(alert_id, by=who.operator)
    return JSONResponse({"alert": alert.to_json()})


def routes() -> list[Route]:
    """The API's routes, each behind `api_guarded`."""
    return [
        Route("/api/tasks", api_guarded(list_tasks), methods=["GET"]),
        Route("/api/tasks/{task_id}", api_guarded(get_task), methods=["GET"]),
        Route("/api/alerts", api_guarded(list_alerts), methods=["GET"]),
        Route("/api/tasks/{task_id}/retry", api_guarded(retry), methods=["POST"]),
        Route("/api/tasks/{task_id}/cancel", api_guarded(cancel), methods=["POST"]),
        Route("/api/alerts/{alert_id}/acknowledge", api_guarded(acknowledge), methods=["POST"]),
    ]
