"""Durable calls from plain code: when a call is given up, and what its caller is told.

A call (`app.call`) is handled by one agent process at a time; a handling that
does not answer within the call's `within` is handed to another process. A
call whose handlers keep dying or overrunning (a poison request) must not be
handed round forever: after `max_attempts` handlings it gets an error answer,
and an operator is alerted. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Kept importable from here, their former home: an exclusive agent's owner key and
# owner state are `core.ownership`'s, a batch's flush `core.batching`'s.
from shepherd.core.batching import BATCH_ERROR, batch_due
from shepherd.core.ownership import NO_STATE, NoState, owner_key_of

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
