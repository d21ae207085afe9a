"""The task list: filters (workflow, states, key, creation time), search by id or key, keyset pages.

Every query goes through `Operations.list_tasks` (indexed, newest first by
`(created_at, id)`); the next page continues after the last task shown
(`TaskCursor`), so any page costs what the first does. A search reads the
tasks whose id starts with the text and those whose key is the text, and
merges the two pages. Each page shows how many tasks match its filters
(`Operations.count_matching`: exact up to 10,000, then "10,000+") and each
task's failure reason on one line; its checkboxes and "all matching" feed
the bulk actions (`dashboard.bulk`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, final
from urllib.parse import urlencode

from shepherd.core.bulk import MAX_BULK, TaskCount
from shepherd.core.states import ProcessState
from shepherd.dashboard import params
from shepherd.dashboard.pages import render
from shepherd.errors import ConfigError
from shepherd.operations import TaskCursor

if TYPE_CHECKING:
    from starlette.datastructures import QueryParams
    from starlette.requests import Request
    from starlette.responses import Response

    from shepherd.core.records import Task
    from shepherd.operations import Operations

__all__ = ["Filters", "count_of", "matching_ids", "page_of_tasks", "task_list"]

#: Tasks per page.
PAGE = 50
_ID_TEXT = re.compile(r"[0-9A-Za-z_-]{1,100}")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    """The task list's query, as read from the URL."""

    states: tuple[ProcessState, ...] = ()
    workflow: str | None = None
    key: str | None = None
    search: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before: TaskCursor | None = None

    @classmethod
    def parse(cls, query: QueryParams, *, request: Request | None = None) -> Filters:
        """The filters of a query string (`request`, when given, is marked as checked: `params`).

        Raises:
            ConfigError: A state, a text, a time or the page cursor is malformed,
                or a time is out of range in UTC (names which).
        """
        states = []
        for value in params.texts(request, query, "state"):
            try:
                states.append(ProcessState(value))
            except ValueError:
                choices = ", ".join(s.value for s in ProcessState)
                raise ConfigError("state", f"{value[:40]!r} is not one of {choices}") from None
        before = params.text(request, query, "before")
        return cls(
            states=tuple(states),
            workflow=params.text(request, query, "workflow", strip=False),
            key=params.text(request, query, "key", strip=False),
            search=params.text(request, query, "q"),
            created_from=params.time(request, query, "from"),
            created_to=params.time(request, query, "to"),
            before=None if before is None else TaskCursor.decode(before),
        )

    def link(self, *, before: TaskCursor | None) -> str:
        """The URL of this query's page after `before` (the first page when None)."""
        query = self.query(before=before)
        return "/tasks" + (f"?{query}" if query else "")

    def query(self, *, before: TaskCursor | None = None) -> str:
        """This query as a query string (without a cursor unless `before` is given)."""
        pairs: list[tuple[str, str]] = [("state", s.value) for s in self.states]
        for name, value in (
            ("workflow", self.workflow),
            ("key", self.key),
            ("q", self.search),
            ("from", _shown(self.created_from)),
            ("to", _shown(self.created_to)),
            ("before", None if before is None else before.encode()),
        ):
            if value:
                pairs.append((name, value))
        return urlencode(pairs)

    def described(self) -> str:
        """The filters in words: `state error, workflow orders.process` (or `every task`)."""
        parts = [f"state {' or '.join(s.value for s in self.states)}"] if self.states else []
        for name, value in (
            ("workflow", self.workflow),
            ("key", self.key),
            ("search", self.search),
            ("created from", _shown(self.created_from)),
            ("created before", _shown(self.created_to)),
        ):
            if value:
                parts.append(f"{name} {value}")
        return ", ".join(parts) or "every task"


def _shown(when: datetime | None) -> str | None:
    """A time of the filters (in UTC: `params.time`) as `params.time` reads it back, exactly.

    `isoformat`, not `strftime`: the year 1 is written `0001`, which a time can be read from.
    """
    if when is None:
        return None
    plain = when.replace(tzinfo=None)
    whole_minute = plain.second == 0 and plain.microsecond == 0
    return plain.isoformat(timespec="minutes" if whole_minute else "auto")


def _queries(filters: Filters) -> list[dict[str, Any]]:
    """The `list_tasks` filters the query reads: one, or for a search, by key and by id prefix."""
    query: dict[str, Any] = {
        "states": filters.states,
        "workflow": filters.workflow,
        "key": filters.key,
        "created_from": filters.created_from,
        "created_to": filters.created_to,
        "before": filters.before,
    }
    search = filters.search
    if search is None:
        return [query]
    queries = [] if filters.key not in (None, search) else [{**query, "key": search}]
    if _ID_TEXT.fullmatch(search):
        queries.append({**query, "id_prefix": search})
    return queries


async def page_of_tasks(
    ops: Operations, filters: Filters, *, limit: int = PAGE
) -> tuple[list[Task], TaskCursor | None]:
    """One page of the list, and the cursor of the next page (None on the last)."""
    merged: dict[str, Task] = {}
    for query in _queries(filters):
        merged.update((t.id, t) for t in await ops.list_tasks(**query, limit=limit + 1))
    found = sorted(merged.values(), key=lambda t: (t.created_at, t.id), reverse=True)
    page = found[:limit]
    more = len(found) > limit
    return page, (TaskCursor.of(page[-1]) if more and page else None)


async def count_of(ops: Operations, filters: Filters) -> TaskCount:
    """How many tasks the query matches, on every page: exact up to MAX_BULK, then "more"."""
    queries = _queries(filters)
    counts = [await ops.count_matching(**query) for query in queries]
    if len(counts) == 2 and not any(c.more for c in counts):
        both = await ops.count_matching(**queries[0], id_prefix=queries[1]["id_prefix"])
        total = counts[0].count + counts[1].count - both.count
        return TaskCount(count=min(total, MAX_BULK), more=total > MAX_BULK)
    return TaskCount(
        count=min(sum(c.count for c in counts), MAX_BULK), more=any(c.more for c in counts)
    )


async def matching_ids(ops: Operations, filters: Filters, *, limit: int) -> list[str]:
    """The ids of at most `limit` tasks the query matches (every page), newest first."""
    found: dict[str, None] = {}
    for query in _queries(filters):
        given = {**query, "before": None}
        found.update(dict.fromkeys(await ops.matching_task_ids(**given, limit=limit)))
    return list(found)[:limit]


async def task_list(request: Request) -> Response:
    """GET /tasks: the filtered, paginated list, how many match, and the bulk actions' form."""
    ops: Operations = request.app.state.guard.operations
    context: dict[str, Any] = {
        "states": [s.value for s in ProcessState],
        "query": request.query_params,
        "now": ops.now(),  # a pending task not due yet says when it is
    }
    try:
        filters = Filters.parse(request.query_params, request=request)
        tasks, cursor = await page_of_tasks(ops, filters)
        count = await count_of(ops, filters)
    except ConfigError as exc:
        return render(
            request,
            "tasks.html",
            status=400,
            problem=exc.message,
            tasks=[],
            next_page=None,
            first_page=None,
            chosen=(),
            count=None,
            filter_query="",
            **context,
        )
    return render(
        request,
        "tasks.html",
        problem=None,
        tasks=tasks,
        chosen=tuple(s.value for s in filters.states),
        next_page=None if cursor is None else filters.link(before=cursor),
        first_page=None if filters.before is None else filters.link(before=None),
        count=count,
        filter_query=filters.query(),
        **context,
    )
