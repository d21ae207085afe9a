"""What a handler's exception means, and the JSON error a failed step carries.

Three kinds: `transient` (worth asking the service again), `permanent` (the
service refused: the step fails and the workflow decides), and `bug` (anything
else: an unexpected exception in our own code, retried like a transient one in
case it passes, then replied with its traceback so that the task goes to an
operator instead of being compensated).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

from shepherd.core.handling import FailureKind
from shepherd.errors import PermanentError, StoreUnavailableError, TransientError
from shepherd.payloads import ERROR_FIELD_CHARS
from shepherd.tasklog import request_fields

if TYPE_CHECKING:
    import logging

    from shepherd.core.records import Request

__all__ = [
    "MESSAGE_LIMIT",
    "TRACEBACK_FRAMES",
    "TRACEBACK_LIMIT",
    "FailureKind",
    "bug_body",
    "classify",
    "error_body",
    "format_traceback",
    "is_bug",
    "log_bug",
]

#: Frames kept in a stored traceback: the innermost ones, where the exception was raised.
TRACEBACK_FRAMES = 8
# Both fit in what a store keeps of an error cut to size (`payloads.dumps_error`), so
# that an error too large to keep whole still has its message and traceback whole.
#: Characters kept in a stored traceback (its end, which names the exception).
TRACEBACK_LIMIT = 2 * ERROR_FIELD_CHARS - len("...\n")
#: Characters kept of an exception's message (its beginning).
MESSAGE_LIMIT = ERROR_FIELD_CHARS - len("...")


def classify(exc: BaseException) -> FailureKind:
    """Whether a handler's exception is transient, permanent, or a bug.

    Transient: TransientError, timeouts, connection errors, the store being
    unavailable (a heartbeat or `once` during a store outage), httpx transport
    errors and HTTP 429/502/503/504. Permanent: PermanentError, and any other
    HTTP status raised by httpx (the service answered no). Anything else is a
    bug: nobody said what it means.
    """
    if isinstance(exc, TransientError | TimeoutError | ConnectionError | StoreUnavailableError):
        return "transient"
    if isinstance(exc, PermanentError):
        return "permanent"
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency
        return "bug"
    if isinstance(exc, httpx.TransportError):
        return "transient"
    if isinstance(exc, httpx.HTTPStatusError):
        return "transient" if exc.response.status_code in (429, 502, 503, 504) else "permanent"
    return "bug"


def error_body(exc: BaseException) -> dict[str, Any]:
    """The JSON error of a failed try: `type`, `message`, and `detail` if the exception has one.

    The message is cut here; a `detail` too large to keep, or one JSON cannot
    carry, is the store's to cut or repair (`payloads.dumps_error`), never to refuse.
    """
    message = str(exc)
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT] + "..."
    body: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    detail = getattr(exc, "detail", None)
    if detail is not None:
        body["detail"] = detail
    return body


def bug_body(exc: BaseException, *, tries: int) -> dict[str, Any]:
    """The JSON error replied for a bug: `error_body` plus `bug`, `traceback` and `tries`."""
    body = error_body(exc)
    body["bug"] = True
    body["traceback"] = format_traceback(exc)
    body["tries"] = tries
    return body


def format_traceback(exc: BaseException) -> str:
    """`exc`'s traceback as text: its innermost frames, at most TRACEBACK_LIMIT characters."""
    text = "".join(traceback.format_exception(exc, limit=-TRACEBACK_FRAMES))
    if len(text) > TRACEBACK_LIMIT:
        text = "...\n" + text[-TRACEBACK_LIMIT:]
    return text


def is_bug(error: object) -> bool:
    """Whether a step's stored error says the agent's handler had a bug."""
    return isinstance(error, dict) and error.get("bug") is True


def log_bug(
    log: logging.Logger, request: Request, tries: int, exc: BaseException, *, last: bool
) -> None:
    """Log a handler's try that raised an unexpected exception, with its traceback.

    WARNING while it is retried; ERROR for the last try, whose failure is replied.
    """
    if last:
        log.error(
            "%s %s/%s attempt %d, try %d: unexpected %s: %s; giving up after %d tries, "
            "the step fails as a bug",
            request.agent,
            request.task_id,
            request.seq,
            request.attempt,
            tries,
            type(exc).__name__,
            exc,
            tries,
            exc_info=exc,
            extra=request_fields(request),
        )
    else:
        log.warning(
            "%s %s/%s attempt %d, try %d: unexpected %s: %s; retrying it like a transient failure",
            request.agent,
            request.task_id,
            request.seq,
            request.attempt,
            tries,
            type(exc).__name__,
            exc,
            exc_info=exc,
            extra=request_fields(request),
        )
