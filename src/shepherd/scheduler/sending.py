"""A step's start: its request to this process's agent worker, or to the queue.

The start of every step (`WorkflowContext.run_step`) goes through `send`: with
room in the agent worker of the scheduler's own process, the request is taken
by it in the start's own transaction and handed over in memory, no other
worker woken; else it is queued. The replies the workflow went on with before
their commit ride in the same transaction (`scheduler.replied`), and a peeked
task's first start claims it there too (`scheduler.claiming`).
"""

from __future__ import annotations

from contextvars import Context
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Request
from shepherd.scheduler import claiming, owned, replied
from shepherd.store import signals as ch
from shepherd.store.ops import StartStep

if TYPE_CHECKING:
    from shepherd.scheduler.parts import SchedulerParts
    from shepherd.store.contract import StepStart

__all__ = ["send"]


async def send(parts: SchedulerParts, task_id: str, epoch: int, start: StepStart) -> datetime:
    """Start the step: its request goes to this process's agent worker when it has
    room (taken in the same transaction, no other worker woken), or to its key's
    owner here (`scheduler.owned`), else to the queue.

    Returns the step's complete_by.
    """
    if task_id in parts.claiming:  # peeked, not held yet: this write claims it
        first = await _send_first(parts, task_id, start)
        if first is not None:
            return first
    # The replies this workflow went on with before their commit ride along.
    replies = await replied.taken(parts, task_id, epoch) if task_id in parts.pending else None
    taker = parts.taker
    worker = None if taker is None or start.suspect else taker.reserve(start.agent)
    if worker is None:
        if start.owner_key is not None and parts.owners is not None and not start.suspect:
            return await owned.send(parts, parts.owners, start, replies)
        if replies:
            started = await replied.write(parts, replies, StartStep(start))
            assert isinstance(started, datetime)
            return started
        return await parts.store.start_step(start)
    assert taker is not None
    try:
        if replies:
            taken = replace(start, taken_by=worker)
            request = await replied.write(parts, replies, StartStep(taken))
            assert isinstance(request, Request)
        else:
            request = await parts.store.start_step_taken(start, worker=worker)
    except BaseException:
        taker.unreserve()
        raise
    # Its handling runs in a context of its own, as one taken from the queue does:
    # none of the workflow run's (`signalling.entered`) leaks into the handler.
    Context().run(taker.hand, request)
    return request.complete_by


async def _send_first(parts: SchedulerParts, task_id: str, start: StepStart) -> datetime | None:
    """Start the step of a peeked task, claiming it in the same transaction
    (`scheduler.claiming`); None if it was claimed meanwhile (start it as usual).

    Its request is taken at once by this process's agent worker, or by its
    key's owner here, as `send` would have it taken.
    """
    taker, owners, key = parts.taker, parts.owners, start.owner_key
    worker = None if taker is None or start.suspect else taker.reserve(start.agent)
    take = None
    if worker is None and key is not None and owners is not None and not start.suspect:
        take = owners.owner_take(start.agent, key)
    taken_by = worker if worker is not None else take
    then = StartStep(start if taken_by is None else replace(start, taken_by=taken_by))
    try:
        started = await claiming.first_write(parts, task_id, then)
    except BaseException:
        if worker is not None:
            assert taker is not None
            taker.unreserve()
        if take is not None:  # committed perhaps, taken for the owner: it looks again
            parts.store.signals.ring(ch.CALLS)
        raise
    if started is claiming.NOT_FIRST:
        if worker is not None:
            assert taker is not None
            taker.unreserve()
        return None
    if isinstance(started, Request):
        if worker is not None:
            assert taker is not None
            Context().run(taker.hand, started)
        else:
            assert owners is not None
            assert key is not None
            assert take is not None
            owners.hand(start.agent, key, started, epoch=take.epoch)
        return started.complete_by
    assert isinstance(started, datetime)
    return started
