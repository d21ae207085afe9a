"""`--log-format json`: one JSON object per log record, on one line.

Each object has `time` (ISO 8601, UTC), `level`, `logger` and `message`, then
`exception` (the formatted traceback) when the record has one, then every
field the record was given as `extra=`: a line about a task carries
`task_id`, `workflow`, `seq`, `agent`, `attempt` and `epoch` (see
`shepherd.tasklog`), so that a log pipeline can select a task's lines
without parsing the message.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from typing import final

__all__ = ["JsonFormatter"]

#: The attributes every LogRecord has: anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
#: uvicorn's copy of its message with terminal colours: not a field of its own.
_NOISE = frozenset({"color_message"})


@final
class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON: time, level, logger, message, extras.

    A value that JSON cannot hold (a datetime, an object, NaN, a dict with
    keys other than strings) is written as its `str`: a line is always valid
    JSON, whatever a caller passed as `extra=`.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one JSON object, without a newline."""
        document: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            document["exception"] = record.exc_text
        if record.stack_info:
            document["stack"] = self.formatStack(record.stack_info)
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in _NOISE and not name.startswith("_"):
                document.setdefault(name, value)
        try:
            return json.dumps(document, default=str, allow_nan=False)
        except (TypeError, ValueError):  # NaN, non-string keys, a cycle: each field as text
            return json.dumps({k: v if _scalar(v) else str(v) for k, v in document.items()})


def _scalar(value: object) -> bool:
    """Whether JSON holds `value` as it is: a string, a whole number, a finite float, null."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, str | int | None)
