"""The door of every route: `guarded` lets in who `Guard.identify` names; `posted_form` checks CSRF.

A refused page (a GET) redirects to the login form; anything else refused is
401 with `WWW-Authenticate: Bearer`. A POST from a browser session must carry
the session's CSRF token in the form field `csrf` (or the `X-CSRF-Token`
header); without it, or with another session's, it is refused with 403 and
nothing is done; so is a browser's POST whose `Origin` is another site. A
Bearer request has no session to forge (browsers never add
that header on their own), so it needs no CSRF token; a client whose Bearer
tokens were wrong too often lately waits (429 with `Retry-After`: `throttle`).

A form route reads only a form: a body of any other type (JSON, say) is
refused with 415 before anything is done, never read as an empty form.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from shepherd.dashboard.auth import COOKIE, SESSION_SECONDS

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.dashboard.auth import Guard, Identity
    from shepherd.dashboard.reach import Reach

__all__ = [
    "FORM_TYPES",
    "admit",
    "check_origin",
    "client_of",
    "form_of",
    "guarded",
    "local_path",
    "posted_form",
    "set_session",
    "too_many",
]

Endpoint = Callable[["Request"], Awaitable[Response]]

#: The content types a form may be posted as.
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})


def guarded(endpoint: Endpoint, *, page: bool = False) -> Endpoint:
    """`endpoint`, for identified requests only (`request.state.who`); `page`: a refused GET goes to the login form.

    A client whose Bearer tokens failed too often lately waits (429, `throttle`).
    """

    async def door(request: Request) -> Response:
        who, wait = await admit(request)
        if wait:
            return too_many(wait)
        if who is None:
            return refusal(request, page=page)
        request.state.who = who
        try:
            response = await endpoint(request)
        finally:
            await request.close()  # a multipart form's uploaded files (Starlette leaves them open)
        if who.cookie is not None:
            set_session(request, response, who.cookie)
        return response

    return door


async def admit(request: Request) -> tuple[Identity | None, int]:
    """Who sent `request` (None: nobody vouches for it), or the seconds its client must wait first.

    A client whose Bearer tokens were wrong too often lately is not even asked
    (`throttle`); each wrong Bearer token counts against its address.
    """
    guard: Guard = request.app.state.guard
    bearer = "authorization" in request.headers and not guard.open
    client = client_of(request)
    if bearer and (wait := guard.throttle.wait(client)):
        return None, wait
    who = await guard.identify(request)
    if who is None and bearer:
        guard.throttle.failed(client)
    return who, 0


def client_of(request: Request) -> str:
    """The client's address: the peer's, or the one a trusted proxy forwards (`reach`)."""
    return request.client.host if request.client is not None else ""


def too_many(wait: int, page: Response | None = None) -> Response:
    """429 with `Retry-After: wait` (`page`, or a line of text, as its body)."""
    response = page or PlainTextResponse(
        f"429 Too Many Requests: too many wrong tokens from your address; try again in {wait} s\n",
        status_code=429,
    )
    response.status_code = 429
    response.headers["Retry-After"] = str(wait)
    return response


def refusal(request: Request, *, page: bool) -> Response:
    """What a request nobody vouches for gets."""
    if page and request.method in ("GET", "HEAD") and "authorization" not in request.headers:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
    return PlainTextResponse(
        "401 Unauthorized: log in, or send Authorization: Bearer TOKEN\n",
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )


async def posted_form(request: Request) -> FormData:
    """The POSTed form of a guarded route, once its CSRF token is checked.

    Raises:
        HTTPException: 403 when a browser session's request lacks its CSRF token.
    """
    form = await form_of(request)
    who: Identity = request.state.who
    if who.session is None:  # a Bearer script
        return form
    check_origin(request)
    guard: Guard = request.app.state.guard
    sent = form.get("csrf") or request.headers.get("x-csrf-token") or ""
    expected = guard.sessions.csrf(who.session)
    if not isinstance(sent, str) or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(
            403, "403 Forbidden: this form's CSRF token is missing or stale; reload the page"
        )
    return form


async def form_of(request: Request) -> FormData:
    """The form a request posts: a body of another type is refused, never read as an empty form.

    A POST without a body (and so without a type) is an empty form.

    Raises:
        HTTPException: 415 when the body is not a form (JSON belongs to the `/api/` routes).
    """
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind not in FORM_TYPES and (kind or await request.body()):
        raise HTTPException(
            415,
            f"415 Unsupported Media Type: this route takes a form, not {kind or 'an untyped body'};"
            " scripts send JSON to the /api/ routes (docs/howto/dashboard.md, JSON API)",
        )
    return await request.form()


def check_origin(request: Request) -> None:
    """Refuse a browser's POST sent from a page of another site (its `Origin` is not this dashboard).

    Browsers send `Origin` with every POST; a request without one (curl, an old
    client) is left to the CSRF token. This also guards the login form, which
    has no session yet to key a CSRF token on. The dashboard's origins are its
    public URL's and the request's own scheme and `Host` (`Reach.same_origin`).

    Raises:
        HTTPException: 403 when `Origin` is present and is not this dashboard.
    """
    origin = request.headers.get("origin")
    if origin is None:
        return
    reach: Reach = request.app.state.reach
    host = request.headers.get("host", "")
    if not reach.same_origin(origin, scheme=request.url.scheme, host=host):
        raise HTTPException(403, "403 Forbidden: this form was sent from another site")


def set_session(request: Request, response: Response, cookie: str) -> None:
    """Set the session cookie: HttpOnly, SameSite=Strict, for the whole dashboard; `Secure` over HTTPS.

    HTTPS is the request's scheme (a trusted proxy's `X-Forwarded-Proto`
    included) or the public URL's (`Reach.secure`).
    """
    reach: Reach = request.app.state.reach
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="strict",
        secure=reach.secure(request.url.scheme),
    )


def local_path(text: str) -> str:
    """`text` if it is a path of this site (`/tasks?...`), else `/`: never a redirect elsewhere."""
    if (
        not text.startswith("/")
        or text.startswith("//")
        or "\\" in text
        or any(ord(c) < 32 for c in text)
    ):
        return "/"
    return text
