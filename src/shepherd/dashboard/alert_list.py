"""The alert list: the stored alerts in one state (open by default) or all, newest first, a page at a time.

Every read goes through `Operations` (`alerts`, `count_alerts`): a page is
the alerts older than the last one shown (`before`, the next page) or the
oldest ones newer than the first one shown (`after`, the previous page), so
any page costs what the first does. Each row links its task; an open alert
has an Acknowledge button, a POST to `actions.acknowledge` that comes back
here. A malformed filter or cursor is a 400 page that names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final
from urllib.parse import urlencode

from shepherd.core.alerts import AlertState
from shepherd.dashboard import params
from shepherd.dashboard.pages import render
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from starlette.datastructures import QueryParams
    from starlette.requests import Request
    from starlette.responses import Response

    from shepherd.core.alerts import StoredAlert
    from shepherd.operations import Operations

__all__ = ["AlertQuery", "alert_list", "page_of_alerts"]

#: Alerts per page.
PAGE = 50
#: The state filter's choices, in the order the page offers them.
STATES = ("open", "acknowledged", "resolved", "all")
_CURSOR = re.compile(r"[0-9]{1,19}")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AlertQuery:
    """The alert list's query, as read from the URL."""

    state: str = "open"
    before: int | None = None
    after: int | None = None

    @classmethod
    def parse(cls, query: QueryParams) -> AlertQuery:
        """The query of a query string.

        Raises:
            ConfigError: The state is not one of STATES, a cursor is not an
                alert's id, or both cursors are given (names which).
        """
        state = query.get("state") or "open"
        if state not in STATES:
            raise ConfigError("state", f"{state[:40]!r} is not one of {', '.join(STATES)}")
        before, after = _cursor(query.get("before"), "before"), _cursor(query.get("after"), "after")
        if before is not None and after is not None:
            raise ConfigError("after", "a page is before an alert or after one, not both")
        return cls(state=state, before=before, after=after)

    def link(self, *, before: int | None = None, after: int | None = None) -> str:
        """The URL of this query's page before or after an alert (the first page without either)."""
        pairs = [("state", self.state)]
        if before is not None:
            pairs.append(("before", str(before)))
        if after is not None:
            pairs.append(("after", str(after)))
        return f"/alerts?{urlencode(pairs)}"

    @property
    def filter(self) -> AlertState | None:
        """The state to list, None for every one."""
        return None if self.state == "all" else AlertState(self.state)


def _cursor(text: str | None, name: str) -> int | None:
    if not text:
        return None
    if not _CURSOR.fullmatch(text):
        raise ConfigError(name, f"a page's cursor is an alert's id, not {text[:20]!r}")
    return int(text)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AlertPage:
    """One page of alerts, newest first, and the links to the pages around it."""

    alerts: list[StoredAlert]
    newer: str | None
    older: str | None


async def page_of_alerts(ops: Operations, query: AlertQuery, *, limit: int = PAGE) -> AlertPage:
    """One page of the list, with the links to the newer and older pages (None where none is).

    Raises:
        ConfigError: A cursor is past what the store holds.
    """
    found = await ops.alerts(
        state=query.filter, before=query.before, after=query.after, limit=limit + 1
    )
    if query.after is not None:  # the oldest newer ones, read newest first
        page, newer, older = found[-limit:], len(found) > limit, True
    else:
        page, newer, older = found[:limit], query.before is not None, len(found) > limit
    return AlertPage(
        alerts=page,
        newer=query.link(after=page[0].id) if newer and page else None,
        older=query.link(before=page[-1].id) if older and page else None,
    )


async def alert_list(request: Request) -> Response:
    """GET /alerts: the alerts of a state (`state`: open, acknowledged, resolved, all), paged."""
    ops: Operations = request.app.state.guard.operations
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    context: dict[str, Any] = {"states": STATES, "here": here}
    params.mark(request)  # the handler's own checks begin
    try:
        query = AlertQuery.parse(request.query_params)
        page = await page_of_alerts(ops, query)
        total = await ops.count_alerts(state=query.filter)
    except ConfigError as exc:
        return render(
            request,
            "alerts.html",
            status=400,
            problem=exc.message,
            chosen="open",
            alerts=[],
            total=None,
            newer=None,
            older=None,
            newest=None,
            **context,
        )
    return render(
        request,
        "alerts.html",
        problem=None,
        chosen=query.state,
        alerts=page.alerts,
        total=total,
        newer=page.newer,
        older=page.older,
        newest=None if page.newer is None else query.link(),
        **context,
    )
