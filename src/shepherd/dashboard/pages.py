"""The templates and how a page is rendered: every template autoescaped, every page knowing who asks.

`render` gives each page the operator's name, the session's CSRF token (for
its forms) and the store's URL without its password; `fragment` renders the
live part of a page alone, for the server-sent events.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.responses import HTMLResponse

from shepherd.dashboard import views

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.dashboard.auth import Identity

__all__ = ["ENVIRONMENT", "Live", "fragment", "live_part", "render"]

#: One environment for every template; autoescape is on whatever the file's name.
ENVIRONMENT = Environment(
    loader=PackageLoader("shepherd.dashboard", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENVIRONMENT.filters["at"] = views.at
ENVIRONMENT.filters["duration"] = views.duration
ENVIRONMENT.filters["reason"] = views.reason_line
ENVIRONMENT.globals["shown_json"] = views.shown_json


def render(request: Request, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """The page `template` for `request`'s operator, with `context`."""
    return HTMLResponse(fragment(request, template, **context), status_code=status)


def fragment(request: Request, template: str, **context: Any) -> str:
    """`template` rendered for `request`'s operator (a page, or the live part of one)."""
    who: Identity = request.state.who
    guard = request.app.state.guard
    csrf = "" if who.session is None else guard.sessions.csrf(who.session)
    return ENVIRONMENT.get_template(template).render(
        operator=who.operator,
        csrf=csrf,
        store=views.shown_store(guard.operations.settings.store),
        login_required=not guard.open,
        **context,
    )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Live:
    """The live part of a page: its HTML, and the digest its event stream starts from."""

    html: Markup
    digest: str


def live_part(request: Request, template: str, **context: Any) -> Live:
    """`template` rendered for `request` (an autoescaped template: safe to insert as is)."""
    html = fragment(request, template, **context)
    # Markup: the text came out of an autoescaped template; escaping it again would show tags.
    return Live(html=Markup(html), digest=digest(html))


def digest(html: str) -> str:
    """A short digest of a fragment: the stream sends it again only when it changes."""
    return hashlib.sha256(html.encode()).hexdigest()[:32]
