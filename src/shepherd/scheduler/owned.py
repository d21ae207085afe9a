"""A step to an exclusive agent whose key this process owns: handed to the key's loop as it starts.

As a plain step's request goes to the agent worker of its own process
(`WorkflowContext._send`), a step to an exclusive, non-batching agent whose
key the owner server of this process owns right now is started with its
request taken by the owner's worker (`OwnerTake`), in the start's own
transaction and behind the owner's fence (the key's live lease at the
ownership's epoch, and no request of the key waiting before it); the
`Request` then goes to the key's loop in memory. The owner takes nothing
from the store for it: a step through an owner costs the transactions of a
plain step. Where the fence does not hold the request is queued as before,
and the key's owner takes it (`take_key_work`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Request
from shepherd.scheduler import replied
from shepherd.store import signals as ch
from shepherd.store.ops import StartStep

if TYPE_CHECKING:
    from shepherd.agents.pending import PendingReply
    from shepherd.scheduler.parts import Owners, SchedulerParts
    from shepherd.store.contract import StepStart

__all__ = ["send"]


async def send(
    parts: SchedulerParts, owners: Owners, start: StepStart, replies: list[PendingReply] | None
) -> datetime:
    """Start a step with an owning key (`start.owner_key`), with the task's `replies`
    riding along (`reply_then`); the step's complete_by.

    Raises:
        StaleEpochError: As any step's start (the claim moved on, a reply did not count).
        StoreUnavailableError: As any step's start.
    """
    key = start.owner_key
    assert key is not None, "a step handed to an owner has an owning key"
    take = owners.owner_take(start.agent, key)
    if take is None:  # not owned here now: queued, as a step to an owner elsewhere
        if replies:
            queued = await replied.write(parts, replies, StartStep(start))
            assert isinstance(queued, datetime)
            return queued
        return await parts.store.start_step(start)
    try:
        if replies:
            started = await replied.write(parts, replies, StartStep(replace(start, taken_by=take)))
        else:
            started = await parts.store.start_step_owned(start, take=take)
    except BaseException:
        # Committed perhaps, taken for the owner: its loop looks at the store again.
        parts.store.signals.ring(ch.CALLS)
        raise
    if isinstance(started, Request):
        owners.hand(start.agent, key, started, epoch=take.epoch)
        return started.complete_by
    assert isinstance(started, datetime)
    return started
