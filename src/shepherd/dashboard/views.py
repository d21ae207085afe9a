"""How the dashboard shows values: JSON cut to size, times, durations, store URLs.

Everything here returns plain text: the templates escape it (autoescape is on
for every template), so a payload holding `<script>` is shown as text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import final

from shepherd.console.runner import reason
from shepherd.core.records import JsonValue

__all__ = ["Shown", "at", "duration", "reason_line", "shown_json", "shown_store"]

#: Characters of a payload, result or error shown before "show all".
PREVIEW = 300
#: Characters of a failure's reason shown in the task list.
REASON = 100


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Shown:
    """A JSON value as text: `preview` always, `full` only when it was cut."""

    preview: str
    full: str | None


def shown_json(value: JsonValue, *, limit: int = PREVIEW) -> Shown:
    """`value` as indented JSON text, cut to `limit` characters (the rest behind `full`)."""
    text = _text(value)
    if len(text) <= limit:
        return Shown(preview=text, full=None)
    return Shown(preview=text[:limit] + "…", full=text)


def _text(value: JsonValue) -> str:
    if value is None:
        return "null"
    try:
        compact = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # a stored value is JSON; show anything else as its repr
        return repr(value)
    if len(compact) <= 80:
        return compact
    return json.dumps(value, indent=2, ensure_ascii=False)


def reason_line(error: JsonValue, *, limit: int = REASON) -> str:
    """A task's failure reason: its first line, cut to `limit` characters (empty when it has none).

    The reason is the one the CLI's `tasks` shows (`reason` of the error, or
    its message); a multi-line one (a message followed by a traceback) shows
    its first line.
    """
    if isinstance(error, dict):
        error = {k: _first_line(v) if k in ("reason", "message") else v for k, v in error.items()}
    text = reason(_first_line(error))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_line(value: JsonValue) -> JsonValue:
    if not isinstance(value, str):
        return value
    return next((line for line in value.splitlines() if line.strip()), "")


def at(when: datetime | None) -> str:
    """A time as `2026-01-31 12:00:05` (UTC), or an em dash."""
    if when is None:
        return "—"
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(span: timedelta | None) -> str:
    """A duration as `850 ms`, `12.3 s`, `4 min 5 s` or `3 h 2 min`; an em dash for None."""
    if span is None:
        return "—"
    seconds = span.total_seconds()
    if seconds < 1:
        return f"{max(seconds, 0) * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def shown_store(url: str) -> str:
    """The store URL without its password, nor its query (which may hold one)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "…"
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        user, _, host = authority.rpartition("@")
        name = user.partition(":")[0]
        authority = f"{name}@{host}" if name else host
    return f"{scheme}://{authority}{slash}{path.partition('?')[0]}"
