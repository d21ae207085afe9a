"""The JSON API's input and output: request bodies and parameters read strictly, records and errors as JSON.

Every refusal is an `ApiError` (a status and a message) and answers
`{"error": {"status": ..., "type": ..., "message": ...}}`; a ShepherdError
gets the status of what it means (`status_of`). A body must be sent as
`Content-Type: application/json` (415 otherwise): a type a page of another
site cannot send without the browser asking first (a CORS preflight, which
the dashboard never grants), and the one type the API reads.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse

from shepherd.core.resources import Resolution
from shepherd.errors import (
    InvalidStateError,
    ShepherdError,
    StoreDamagedError,
    StoreUnavailableError,
    UnknownAlertError,
    UnknownTaskError,
)
from shepherd.payloads import MAX_PAYLOAD_BYTES, loads

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from starlette.requests import Request

    from shepherd.core.records import Event, JsonValue, Step, Task

__all__ = [
    "ApiError",
    "error_response",
    "event_json",
    "json_body",
    "number",
    "status_of",
    "step_json",
    "task_json",
]

#: The largest request body read, in bytes: a payload at the store's default limit, and room.
BODY_LIMIT = MAX_PAYLOAD_BYTES + 64 * 1024
#: The largest step number or alert id accepted (PostgreSQL's bigint).
LARGEST = 2**63 - 1


class ApiError(Exception):
    """A request the API refuses: its HTTP status and why (nothing was changed)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(
    status: int,
    message: str,
    *,
    kind: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """`{"error": {"status", "type", "message"}}` with `status`."""
    body: dict[str, JsonValue] = {"status": status, "type": kind, "message": message}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def status_of(error: ShepherdError) -> int:
    """The HTTP status of a refused action: 404 unknown, 409 wrong state, 503 store down, else 400."""
    if isinstance(error, UnknownTaskError | UnknownAlertError):
        return 404
    if isinstance(error, InvalidStateError):
        return 409
    if isinstance(error, StoreUnavailableError | StoreDamagedError):
        return 503
    return 400


async def json_body(request: Request, *, fields: Collection[str]) -> dict[str, JsonValue]:
    """The request's JSON object (an empty body is `{}`), holding only `fields`.

    Raises:
        ApiError: 415 not `application/json`; 413 over BODY_LIMIT; 400 not a
            JSON object, or a field it does not take.
        PayloadError: The body is not JSON (malformed, too deep, a NUL).
    """
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/json":
        raise ApiError(
            415,
            f"send the body as JSON, with Content-Type: application/json (not {kind or 'none'})",
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > BODY_LIMIT:
            raise ApiError(413, f"the body is over {BODY_LIMIT} bytes")
    if not body.strip():
        return {}
    value = loads(bytes(body), limit=BODY_LIMIT)  # PayloadError (400) when it is not JSON
    if not isinstance(value, dict):
        raise ApiError(400, f"the body must be a JSON object, not {type(value).__name__}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        takes = ", ".join(sorted(fields)) or "no field"
        raise ApiError(400, f"unknown field {unknown[0]!r}: this route takes {takes}")
    return value


def number(value: object, name: str, *, low: int = 1, high: int = LARGEST) -> int:
    """`value`, a JSON integer, if it is in [low, high].

    Raises:
        ApiError: 400 for anything else (a bool, a fraction, a text, a number out of range).
    """
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ApiError(
            400, f"{name} must be a whole number from {low} to {high}, not {value!r:.40}"
        )
    return value


def task_json(task: Task) -> dict[str, JsonValue]:
    """A task's fields as JSON, without its steps (instants in ISO 8601)."""
    return _plain(task, skip="steps")


def step_json(step: Step) -> dict[str, JsonValue]:
    """A step's fields as JSON (its resolution as `Resolution.to_json` writes it)."""
    return _plain(step)


def event_json(event: Event) -> dict[str, JsonValue]:
    """An event of a task's history as JSON."""
    return _plain(event)


def _plain(record: Any, *, skip: str = "") -> dict[str, JsonValue]:
    return {
        field.name: _value(getattr(record, field.name))
        for field in dataclasses.fields(record)
        if field.name != skip
    }


def _value(value: Any) -> JsonValue:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Resolution):
        return value.to_json()
    if isinstance(value, tuple):
        return [_value(item) for item in value]
    return value  # the records' other fields are JSON already
