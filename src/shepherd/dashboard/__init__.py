"""The web dashboard: `shepherd dashboard` (install the `shepherd[dashboard]` extra).

Server-rendered pages over the App's operations (Starlette and Jinja2, one
small script for the live parts, no build step): the overview, the task list,
the task page, and the operator's actions. `create_dashboard` makes the ASGI
application (`Reach`: the host names it answers to, its public URL, the
proxies it believes); `serve` runs it with uvicorn, refusing a non-loopback
address or a public URL without a token, and a token under 16 characters.
"""

from __future__ import annotations

from shepherd.dashboard.reach import Reach
from shepherd.dashboard.server import check_exposure, serve
from shepherd.dashboard.site import create_dashboard

__all__ = ["Reach", "check_exposure", "create_dashboard", "serve"]
