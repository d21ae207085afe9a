"""A peeked task's first write, which claims it (`core.claiming`).

The scheduler peeks at a task and drives it as if it held it, at the epoch
its claim will give it; the first write of the run (a step's start, a sleep,
its end) claims it in the same transaction (`reply_then(..., claim=...)`).
Parallel branches of the workflow (`asyncio.gather`) take turns: the first to
write claims, the others then write as any holder does. A claim another
holder won first makes the write fail as a stale one (`StaleEpochError`): the
run stops, having written nothing. A write whose outcome is unknown stops it
as any does (`StoreUnavailableError`); the scheduler reads the task again and
goes on only if the claim was made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from shepherd.errors import StaleEpochError

if TYPE_CHECKING:
    from shepherd.scheduler.parts import SchedulerParts, Then

__all__ = ["NOT_FIRST", "first_write"]


@final
class _NotFirst:
    """The task was claimed meanwhile: write as its holder."""


#: What `first_write` returns when the task needs no claim (any more).
NOT_FIRST: Final = _NotFirst()


async def first_write(parts: SchedulerParts, task_id: str, then: Then) -> object:
    """Write `then`, claiming its peeked task first; `NOT_FIRST` if it is claimed already.

    Raises:
        StaleEpochError: Another holder claimed the task first; nothing was written.
        StoreUnavailableError: The transaction failed, or its outcome is unknown.
    """
    claim = parts.claiming.get(task_id)
    if claim is None:
        return NOT_FIRST
    async with claim.turn:
        if parts.claiming.get(task_id) is not claim:
            return NOT_FIRST
        went = await parts.store.reply_then((), then=then, claim=claim.epoch)
        outcome = went.then
        # Stale: the claim was not made (`then` went nowhere). Any other outcome is
        # `then`'s own, written (or refused, as a payload that is not JSON) under the
        # claim made in its transaction.
        if isinstance(outcome, StaleEpochError):
            raise outcome
        del parts.claiming[task_id]
        claim.claimed()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome
