"""Durable calls from plain code: when a call is given up, and what its caller is told.

A call (`app.call`) is handled by one agent process at a time; a handling that
does not answer within the call's `within` is handed to another process. A
call whose handlers keep dying or overrunning (a poison request) must not be
handed round forever: after `max_attempts` handlings it gets an error answer,
and an operator is alerted. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

__all__ = [
    "BATCH_ERROR",
    "GAVE_UP",
    "NO_STATE",
    "NoState",
    "batch_due",
    "gave_up_body",
    "may_take",
    "owner_key_of",
]


class NoState:
    """The type of `NO_STATE`: an answer that leaves the key's owner state as it is."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_STATE"


#: Passed as `state` to `answer_owned`: the owner state is not changed.
NO_STATE = NoState()


def batch_due(*, max_items: int, max_delay: float, waiting: int, oldest_age: float) -> float:
    """Seconds until a key's waiting calls should be flushed as a batch (0: now).

    Flushed at once when `max_items` wait; otherwise when the oldest has
    waited `max_delay` (so a lone call is served by the timer).
    """
    if waiting >= max_items:
        return 0.0
    return max(max_delay - oldest_age, 0.0)


#: The error type of the answers of a batch whose handler broke the batch contract.
BATCH_ERROR = "BatchError"

#: The error type of a call given up after `max_attempts` handlings.
GAVE_UP = "CallGaveUp"


def may_take(attempts: int, max_attempts: int) -> bool:
    """Whether a call handled `attempts` times already may be handled once more."""
    return attempts < max_attempts


def gave_up_body(agent: str, attempts: int, within: float) -> JsonValue:
    """The error answer of a call given up after `attempts` handlings without an answer."""
    return {
        "type": GAVE_UP,
        "message": (
            f"{agent}: handled {attempts} times without an answer (each handling died or "
            f"took longer than its {within:g} s); given up"
        ),
    }


def owner_key_of(
    exclusive_by: str | Callable[[JsonValue], object], payload: JsonValue
) -> str | ValueError:
    """The owning key of a call to an exclusive agent, or why there is none.

    `exclusive_by` names a payload field (the payload must be an object whose
    field holds a non-empty string) or is a function of the payload returning
    a non-empty string. A function that raises is reported, not propagated.
    """
    if isinstance(exclusive_by, str):
        if not isinstance(payload, dict):
            return ValueError(
                f"the payload must be a JSON object with a {exclusive_by!r} field, "
                f"not {type(payload).__name__}"
            )
        if exclusive_by not in payload:
            return ValueError(f"the payload has no {exclusive_by!r} field")
        key: object = payload[exclusive_by]
        source = f"the payload's {exclusive_by!r} field"
    else:
        try:
            key = exclusive_by(payload)
        except Exception as exc:
            return ValueError(f"its key function raised {type(exc).__name__}: {exc}")
        source = "its key function"
    if not isinstance(key, str) or not key:
        return ValueError(f"{source} must give a non-empty string, not {key!r}")
    return key
