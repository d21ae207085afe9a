"""The dashboard's request parameters, read and checked in one place.

Every route reads what the request carries (its path's task id, its query,
its form's fields) through these readers, and nothing else: each names the
parameter it refuses in a `ConfigError` (the page shows it with status 400,
or 404 for a task id no task can have), and none lets through a value the
store cannot take (a number past its integer range, a time that leaves the
calendar once turned to UTC, a text with a NUL or a lone surrogate).

Each reader also marks the request as having reached its handler's own
checks (`request.state.params_checked`): a test that drives every route with
generated input counts them, so that it cannot pass by being refused at the
door (the Host check, the login, the CSRF token) instead.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from shepherd.errors import ConfigError, UnknownTaskError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.requests import Request

__all__ = [
    "MARK",
    "MAX_TEXT",
    "checked",
    "mark",
    "task_id",
    "text",
    "texts",
    "time",
    "whole",
]

#: The attribute of `request.state` set once a reader looked at the request.
MARK = "params_checked"
#: The most characters of a text parameter (a workflow name, a key, a search).
MAX_TEXT = 200
#: What a task id may hold (20 hex digits, then `.seq` per level for a child workflow).
_TASK_ID = re.compile(r"[0-9A-Za-z_.-]{1,400}")
_DIGITS = re.compile(r"[0-9]+")


def mark(request: Request | None) -> None:
    """Record that `request` reached its handler's own parameter checks (None: a caller without one)."""
    if request is not None:
        setattr(request.state, MARK, True)


def checked(scope: Mapping[str, Any]) -> bool:
    """Whether the request of `scope` reached its handler's own checks (`mark`)."""
    state = scope.get("state")
    return isinstance(state, dict) and bool(state.get(MARK))


def _plain(name: str, value: object, *, limit: int) -> str:
    """`value` if it is a text the store can hold (no NUL, no lone surrogate), at most `limit` long."""
    if not isinstance(value, str):  # a file sent in a multipart form
        raise ConfigError(name, "a text is needed, not a file")
    if len(value) > limit:
        raise ConfigError(name, f"{value[:40]!r}... is longer than {limit} characters")
    if any(c == "\0" or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise ConfigError(name, f"{value[:40]!r} holds a NUL or a lone surrogate")
    return value


def text(
    request: Request | None,
    values: Mapping[str, Any],
    name: str,
    *,
    limit: int = MAX_TEXT,
    strip: bool = True,
) -> str | None:
    """The text `name` of `values` (a query or a form), `strip`ped of surrounding spaces; None when empty.

    Raises:
        ConfigError: It is a file, longer than `limit`, or holds a NUL or a lone surrogate.
    """
    mark(request)
    value = values.get(name)
    if value is None:
        return None
    found = _plain(name, value, limit=limit)
    return (found.strip() if strip else found) or None


def texts(request: Request | None, values: Any, name: str, *, limit: int = MAX_TEXT) -> list[str]:
    """Every non-empty text `name` of `values` (a query or a form: `getlist`), stripped.

    Raises:
        ConfigError: One is a file, longer than `limit`, or holds a NUL or a lone surrogate.
    """
    mark(request)
    found = (_plain(name, v, limit=limit).strip() for v in values.getlist(name))
    return [v for v in found if v]


def whole(
    request: Request | None, values: Mapping[str, Any], name: str, *, low: int, high: int
) -> int | None:
    """The whole number `name` of `values` (ASCII digits), in [low, high]; None when empty.

    Raises:
        ConfigError: It is not written in the digits 0-9 (`²` is not one), or is out of range.
    """
    found = text(request, values, name, limit=60)
    if found is None:
        return None
    if not _DIGITS.fullmatch(found):
        raise ConfigError(name, f"a whole number is needed, not {found[:20]!r}")
    number = int(found)
    if not low <= number <= high:
        shown = found if len(found) <= 20 else f"a number of {len(found)} digits"
        raise ConfigError(name, f"{shown} is not between {low} and {high}")
    return number


def time(request: Request | None, values: Mapping[str, Any], name: str) -> datetime | None:
    """The time `name` of `values` (ISO 8601; UTC when it names no zone), in UTC; None when empty.

    Raises:
        ConfigError: It is not such a time, or is out of range once turned to UTC
            (`0001-01-01T00:00+14:00` is in the year 0).
    """
    found = text(request, values, name, limit=60)
    if found is None:
        return None
    try:
        when = datetime.fromisoformat(found)
    except ValueError:
        raise ConfigError(name, f"{found[:40]!r} is not a time such as 2026-01-31T12:00") from None
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except OverflowError:
        raise ConfigError(
            name, f"{found[:40]!r} is out of range in UTC (years 1 to 9999)"
        ) from None


def task_id(request: Request) -> str:
    """The task id of the request's path.

    Raises:
        UnknownTaskError: It is not a text a task id can be (no task has it).
    """
    mark(request)
    value = str(request.path_params["task_id"])
    if not _TASK_ID.fullmatch(value):
        shown = value if len(value) <= 40 else value[:40] + "…"
        raise UnknownTaskError(shown)
    return value
