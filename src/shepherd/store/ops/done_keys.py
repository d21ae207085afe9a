"""Done keys: at-most-once marks of an effect (`AgentRequest.once`), committed before it runs."""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.core.records import JsonValue
from shepherd.store.ops.base import Runs, Write, method, operation

__all__ = ["AbandonOnce", "BeginOnce", "DoneKeys", "FinishOnce"]


@operation
class BeginOnce(Write[tuple[str, JsonValue]]):
    """Mark `key` started by `holder`, unless it is already marked.

    Returns ("new", None) after inserting a `started` mark (committed when
    this returns, so before the caller runs its effect); ("done", result)
    when a result was recorded for `key`; ("started", None) when an
    execution marked `key` and never recorded nor abandoned it.
    """

    key: str
    _: KW_ONLY
    holder: str


@operation
class FinishOnce(Write[bool]):
    """Record `result` on `holder`'s started mark of `key` (it becomes `done`).

    Raises PayloadError (changing nothing) if `result` is not acceptable JSON.
    False if there is no started mark of `holder` for `key` any more. A `done`
    mark is never removed.
    """

    key: str
    _: KW_ONLY
    holder: str
    result: JsonValue


@operation
class AbandonOnce(Write[bool]):
    """Delete `holder`'s started mark of `key` (its effect did not happen).

    Never deletes a `done` mark nor another holder's. False if there was none.
    """

    key: str
    _: KW_ONLY
    holder: str


class DoneKeys(Runs):
    """The store's methods for done keys."""

    begin_once = method(BeginOnce)
    finish_once = method(FinishOnce)
    abandon_once = method(AbandonOnce)
