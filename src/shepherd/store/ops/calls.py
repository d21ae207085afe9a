"""Durable calls from plain code (`app.call`): sent by callers, taken and answered by agents.

A call is not a task. It is handled by one agent process at a time; a
handling that has not answered by its `complete_by` (`within` after it was
taken) is handed to another, up to `max_attempts` handlings, after which the
call is answered with an error. A call has exactly one answer: only its
latest handling may give it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.records import CallAnswer, CallRequest, JsonValue
from shepherd.core.resources import Resolution
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["AnswerCall", "Calls", "GetAnswers", "SendCall", "TakeCalls"]


@operation
class SendCall(Write[None]):
    """Store a call (rings `signals.CALLS`); deleted `expires_in` seconds from now.

    A call with an `owner_key` (to an exclusive agent) is taken only by that
    key's owner (`take_key_calls`), never by `take_calls`.

    Raises:
        PayloadError: `payload` is not JSON or is too large.
    """

    call_id: str
    agent: str
    payload: JsonValue
    _: KW_ONLY
    within: float
    max_attempts: int
    expires_in: float
    #: The owning key of a call to an exclusive agent (only its owner takes it), or None.
    owner_key: str | None = None
    #: Where the call's entity lives (`app.call(..., entity=)`), kept with the call
    #: and given to each of its handlings (`CallRequest.resolution`), or None.
    resolution: Resolution | None = None


@operation
class TakeCalls(Write[tuple[list[CallRequest], list[CallRequest]]]):
    """Take up to `limit` waiting calls of `agents` for `worker`, oldest first.

    Returns (taken, given up). A call whose `max_attempts` handlings all ended
    without an answer is not taken again: it is answered with an error
    (`shepherd.core.calls.gave_up_body`) and returned as given up, so that the
    worker can alert an operator.
    """

    _: KW_ONLY
    worker: str
    agents: Sequence[str]
    limit: int


@operation
class AnswerCall(Write[bool]):
    """Answer a call (rings `signals.ANSWERS`); False, and nothing written, unless
    `worker`'s handling `attempt` is the call's latest and it is unanswered.

    An error body is cut to the payload limit, never refused; a result that is
    not JSON or too large raises PayloadError.
    """

    call_id: str
    _: KW_ONLY
    worker: str
    attempt: int
    ok: bool
    body: JsonValue


@operation
class GetAnswers(Read[dict[str, CallAnswer]]):
    """The answers of those of `call_ids` that are answered (and not yet deleted)."""

    call_ids: Sequence[str]


class Calls(Runs):
    """The store's methods for durable calls."""

    send_call = method(SendCall)
    take_calls = method(TakeCalls)
    answer_call = method(AnswerCall)
    get_answers = method(GetAnswers)
