"""Logging in with the shared token or a named operator's token; logging out.

A successful login sets the session cookie (`access.set_session`: HttpOnly,
SameSite=Strict) holding the operator's name signed by the server, never the
token. Without a configured token there is nothing to log in to: the login
page sends everyone to the overview.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import RedirectResponse, Response

from shepherd.dashboard import params
from shepherd.dashboard.access import (
    check_origin,
    client_of,
    form_of,
    local_path,
    posted_form,
    set_session,
    too_many,
)
from shepherd.dashboard.auth import COOKIE, MAX_TOKEN_CHARS, Identity
from shepherd.dashboard.pages import render

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.dashboard.auth import Guard

__all__ = ["log_in", "log_out", "login_form"]


async def login_form(request: Request) -> Response:
    """GET /login: the form (the overview when no token is configured)."""
    guard: Guard = request.app.state.guard
    target = local_path(params.text(request, request.query_params, "next", limit=2000) or "/")
    if guard.open:
        return RedirectResponse(target, status_code=303)
    request.state.who = Identity(operator="", session=None)
    return render(request, "login.html", next=target, problem=None)


async def log_in(request: Request) -> Response:
    """POST /login: field `token` (the shared one or an operator's), `next` (where to go)."""
    try:
        return await _log_in(request)
    finally:
        await request.close()  # a multipart form's uploaded files (Starlette leaves them open)


async def _log_in(request: Request) -> Response:
    guard: Guard = request.app.state.guard
    check_origin(request)  # no session yet to key a CSRF token on: another site's form is refused
    form = await form_of(request)
    target = local_path(params.text(request, form, "next", limit=2000) or "/")
    if guard.open:
        return RedirectResponse(target, status_code=303)
    request.state.who = Identity(operator="", session=None)
    client = client_of(request)
    if wait := guard.throttle.wait(client):
        problem = f"Too many wrong tokens from your address: try again in {wait} s."
        return too_many(wait, render(request, "login.html", next=target, problem=problem))
    token = params.text(request, form, "token", limit=MAX_TOKEN_CHARS) or ""
    operator = await guard.check_token(token) if token else None
    if operator is None:
        guard.throttle.failed(client)
        return render(
            request, "login.html", status=401, next=target, problem="That token opens nothing."
        )
    guard.throttle.succeeded(client)
    cookie, _ = guard.sessions.issue(operator)
    response = RedirectResponse(target, status_code=303)
    set_session(request, response, cookie)
    return response


async def log_out(request: Request) -> Response:
    """POST /logout: forget the session cookie (CSRF-checked like any action)."""
    await posted_form(request)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
