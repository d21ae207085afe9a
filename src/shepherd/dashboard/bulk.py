"""Triage in bulk from the task list: retry many tasks, or acknowledge their alerts, in one action.

`POST /tasks/bulk` (the list's form: ticked `task`s, or `all` the tasks the
list's `filter` matches, and an `action`) changes nothing: it fixes the ids
and shows a confirmation page that says how many, carrying the ids to
`POST /tasks/bulk/confirm`, which acts on exactly those (one store write)
and shows how many were done and which were refused, with why. A retry of
"all matching" takes the tasks in `error` among them: no other can be
retried. More than `MAX_BULK` tasks are refused: narrow the filter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.datastructures import QueryParams

from shepherd.core.bulk import MAX_BULK, BulkAction, BulkOutcome
from shepherd.core.states import ProcessState
from shepherd.dashboard import params
from shepherd.dashboard.access import posted_form
from shepherd.dashboard.listing import Filters, matching_ids
from shepherd.dashboard.pages import render
from shepherd.errors import ConfigError, ShepherdError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.requests import Request
    from starlette.responses import Response

    from shepherd.operations import IdempotencyKey, Operations

__all__ = ["act", "confirm", "retryable", "run_bulk"]

#: The longest task id read from a form (ids are 20 hex digits: `params.task_id`).
ID_CHARS = 100
#: Task ids the confirmation page lists (the rest are counted).
SHOWN = 50
_VERBS = {BulkAction.RETRY: "Retry", BulkAction.ACKNOWLEDGE: "Acknowledge the alerts of"}
_EXPLAINED = {
    BulkAction.RETRY: "Each goes back to work from its failed step, with its own payloads.",
    BulkAction.ACKNOWLEDGE: "Their open alerts are acknowledged; the tasks themselves are not touched.",
}
_DONE = {BulkAction.RETRY: "retried", BulkAction.ACKNOWLEDGE: "tasks' alerts acknowledged"}


def retryable(filters: Filters) -> Filters | None:
    """The tasks of `filters` a retry can act on: those in `error` (None: its states exclude it)."""
    if filters.states and ProcessState.ERROR not in filters.states:
        return None
    return Filters(
        states=(ProcessState.ERROR,),
        workflow=filters.workflow,
        key=filters.key,
        search=filters.search,
        created_from=filters.created_from,
        created_to=filters.created_to,
    )


async def confirm(request: Request) -> Response:
    """POST /tasks/bulk: the confirmation page, the ids fixed (nothing is done yet)."""
    form = await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    back = "/tasks"
    try:
        action = _action(params.text(request, form, "action", limit=40))
        if params.text(request, form, "all", limit=10):
            query = params.text(request, form, "filter", limit=4000) or ""
            filters = Filters.parse(QueryParams(query), request=request)
            back = filters.link(before=None)
            chosen = retryable(filters) if action is BulkAction.RETRY else filters
            ids = [] if chosen is None else await matching_ids(ops, chosen, limit=MAX_BULK + 1)
            scope = f"All the tasks{_in_error(action, filters)} matching {filters.described()}."
        else:
            ids = list(dict.fromkeys(params.texts(request, form, "task", limit=ID_CHARS)))
            scope = "The tasks ticked in the list."
        _checked_size(ids, everything=bool(params.text(request, form, "all", limit=10)))
    except ShepherdError as exc:
        return render(request, "bulk_refused.html", status=400, problem=exc.message, back=back)
    return render(
        request,
        "bulk_confirm.html",
        action=action.value,
        verb=_VERBS[action],
        explained=_EXPLAINED[action],
        scope=scope,
        ids=ids,
        shown=SHOWN,
        back=back,
    )


async def act(request: Request) -> Response:
    """POST /tasks/bulk/confirm: act on exactly the ids confirmed; the result page."""
    form = await posted_form(request)
    ops: Operations = request.app.state.guard.operations
    try:
        action = _action(params.text(request, form, "action", limit=40))
        ids = (params.text(request, form, "ids", limit=MAX_BULK * (ID_CHARS + 1)) or "").split()
        _checked_size(ids, everything=False)
        outcome = await run_bulk(ops, action, ids, by=request.state.who.operator)
    except ShepherdError as exc:
        return render(request, "bulk_refused.html", status=400, problem=exc.message, back="/tasks")
    return render(
        request, "bulk_done.html", outcome=outcome, verb=_VERBS[action], done_words=_DONE[action]
    )


async def run_bulk(
    ops: Operations,
    action: BulkAction,
    ids: Sequence[str],
    *,
    by: str,
    key: IdempotencyKey | None = None,
) -> BulkOutcome:
    """Do `action` to the tasks `ids`, by `by` (with a script's idempotency key, if given)."""
    if action is BulkAction.RETRY:
        return await ops.retry_many(ids, by=by, key=key)
    return await ops.acknowledge_alerts_of(ids, by=by, key=key)


def _action(value: object) -> BulkAction:
    try:
        return BulkAction(str(value or ""))
    except ValueError:
        choices = ", ".join(a.value for a in BulkAction)
        raise ConfigError("action", f"{str(value)[:40]!r} is not one of {choices}") from None


def _in_error(action: BulkAction, filters: Filters) -> str:
    """` in error` for a retry whose filter takes other states too (the others are left out)."""
    only_errors = filters.states == (ProcessState.ERROR,)
    return " in error" if action is BulkAction.RETRY and not only_errors else ""


def _checked_size(ids: Sequence[str], *, everything: bool) -> None:
    """Refuse no task at all, or more than MAX_BULK (with what to do instead)."""
    if not ids:
        raise ShepherdError(
            "no task matches: nothing to do"
            if everything
            else "no task chosen: tick some tasks, or choose all matching the filter"
        )
    if len(ids) > MAX_BULK:
        raise ShepherdError(
            f"more than {MAX_BULK:,} tasks: a bulk action takes at most {MAX_BULK:,}; "
            "narrow the filter (a workflow, a state, a time range)"
        )
