"""The JSON API's bulk actions, for scripts: retry many tasks, acknowledge many tasks' alerts.

    POST /api/tasks/retry          {"task_ids": [...]} or {"filter": {...}}
    POST /api/alerts/acknowledge   {"task_ids": [...]} or {"filter": {...}}

Authenticated like every route (`Authorization: Bearer TOKEN`); the body is
JSON (`Content-Type: application/json`, else 415), which a page of another
site cannot send without the browser asking first, and a browser's request
from another site's page is refused by its `Origin`. A filter takes what the
task list filters on: `states` (or `state`), `workflow`, `key`, `id_prefix`,
`created_from`, `created_to`, `updated_since` (ISO 8601 times, UTC when
without a zone); its tasks are fixed when the request arrives (at most
`MAX_BULK`), and a retry takes those in `error` among them. The reply is the
`BulkOutcome` as JSON: `done` (a count) and `done_ids`, `refused` (each task
with why). With an `Idempotency-Key` header, the first request's reply is
stored with its action, and the same key again returns it (header
`Idempotent-Replayed: true`) and does nothing; the same key for another
request is refused with 422.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse, Response

from shepherd.core.bulk import MAX_BULK, BulkAction, BulkOutcome
from shepherd.core.states import ProcessState
from shepherd.dashboard.access import check_origin
from shepherd.dashboard.bulk import run_bulk
from shepherd.errors import ConfigError, ShepherdError
from shepherd.operations import IdempotencyKey
from shepherd.payloads import loads

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.core.records import JsonValue
    from shepherd.operations import Operations

__all__ = ["acknowledge_alerts", "retry_tasks"]

#: The most bytes a bulk request's body may have (10,000 ids fit many times over).
MAX_BODY = 1024 * 1024
_TEXT_FILTERS = ("workflow", "key", "id_prefix")
_TIME_FILTERS = ("created_from", "created_to", "updated_since")
_FILTERS = frozenset({"states", "state", *_TEXT_FILTERS, *_TIME_FILTERS})


async def retry_tasks(request: Request) -> Response:
    """POST /api/tasks/retry: retry many tasks in `error`, each from its failed step."""
    return await _bulk(request, BulkAction.RETRY)


async def acknowledge_alerts(request: Request) -> Response:
    """POST /api/alerts/acknowledge: acknowledge the open alerts of many tasks."""
    return await _bulk(request, BulkAction.ACKNOWLEDGE)


async def _bulk(request: Request, action: BulkAction) -> Response:
    if request.state.who.session is not None:  # a browser: never from another site's page
        check_origin(request)
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        return _error(415, "send the request as JSON (Content-Type: application/json)")
    ops: Operations = request.app.state.guard.operations
    by: str = request.state.who.operator
    body = await request.body()
    try:
        if len(body) > MAX_BODY:
            raise ConfigError("body", f"more than {MAX_BODY} bytes")
        asked = loads(body.decode("utf-8", "replace"))
        key = _key(request, action, by, asked)
        if key is not None:
            stored = await ops.bulk_reply(key.key)
            if stored is not None:
                if stored.action is not action or stored.digest != key.digest:
                    raise ConfigError(
                        "Idempotency-Key", f"{key.key!r} was used for another request"
                    )
                return _reply(stored.outcome, replayed=True)
        ids = await _task_ids(ops, action, asked)
        outcome = await run_bulk(ops, action, ids, by=by, key=key)
    except ConfigError as exc:
        return _error(422 if exc.field == "Idempotency-Key" else 400, exc.message)
    except ShepherdError as exc:
        return _error(400, exc.message)
    return _reply(outcome, replayed=outcome.replayed)


def _key(request: Request, action: BulkAction, by: str, asked: JsonValue) -> IdempotencyKey | None:
    """The request's idempotency key, with the digest of what it asks (who, what, on which tasks)."""
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    asked_text = json.dumps([action.value, by, asked], sort_keys=True, separators=(",", ":"))
    return IdempotencyKey(key=key, digest=hashlib.sha256(asked_text.encode()).hexdigest())


async def _task_ids(ops: Operations, action: BulkAction, asked: JsonValue) -> list[str]:
    """The ids the request names, or those its filter matches now (at most MAX_BULK)."""
    if not isinstance(asked, dict) or len(asked.keys() & {"task_ids", "filter"}) != 1:
        raise ConfigError("body", 'give either "task_ids": [...] or "filter": {...}')
    if "task_ids" in asked:
        ids = asked["task_ids"]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ConfigError("task_ids", "a list of task ids (strings) is needed")
        return [str(i) for i in ids]
    filters = _filters(asked["filter"])
    if action is BulkAction.RETRY:
        states = filters.get("states") or (ProcessState.ERROR,)
        if ProcessState.ERROR not in states:
            return []
        filters["states"] = (ProcessState.ERROR,)
    ids = await ops.matching_task_ids(limit=MAX_BULK + 1, **filters)
    if len(ids) > MAX_BULK:
        raise ConfigError(
            "filter",
            f"more than {MAX_BULK:,} tasks match: a bulk action takes at most "
            f"{MAX_BULK:,}; narrow the filter",
        )
    return ids


def _filters(given: JsonValue) -> dict[str, Any]:
    """`list_tasks` filters from the request's `filter` object."""
    if not isinstance(given, dict):
        raise ConfigError("filter", "a JSON object of filters is needed")
    unknown = sorted(given.keys() - _FILTERS)
    if unknown:
        raise ConfigError("filter", f"unknown filters {unknown}; known: {sorted(_FILTERS)}")
    states = given.get("states", given.get("state", []))
    if isinstance(states, str):
        states = [states]
    if not isinstance(states, list):
        raise ConfigError("states", "a list of states is needed")
    out: dict[str, Any] = {"states": tuple(_state(state) for state in states)}
    for name in _TEXT_FILTERS:
        value = given.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise ConfigError(name, "a string is needed")
            out[name] = value
    for name in _TIME_FILTERS:
        value = given.get(name)
        if value is not None:
            out[name] = _time(name, value)
    return out


def _state(value: JsonValue) -> ProcessState:
    try:
        return ProcessState(str(value))
    except ValueError:
        choices = ", ".join(s.value for s in ProcessState)
        raise ConfigError("states", f"{str(value)[:40]!r} is not one of {choices}") from None


def _time(name: str, value: JsonValue) -> datetime:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(
            name, f"{str(value)[:40]!r} is not a time such as 2026-01-31T12:00Z"
        ) from None
    try:
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except OverflowError:
        raise ConfigError(name, f"{str(value)[:40]!r} is past what a time can hold") from None


def _reply(outcome: BulkOutcome, *, replayed: bool) -> Response:
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return JSONResponse(outcome.to_json(), headers=headers)


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
