"""A task's replies handed over before their commit, as its workflow's next write takes them.

An agent worker of this process offers its reply to the scheduler before it
commits it (`agents.pending`); the step is handed the body at once and its
workflow goes on. The next write of that task must not get ahead of those
replies: a write that can carry them (a step's start, a sleep, the finish) records them
in its own transaction (`reply_then`), written only if they all count; any
other write first waits for them to be committed alone. A reply that did not
count (the claim or the step moved on meanwhile) stops the workflow that went
on with it (`StaleEpochError`, the claim is lost); one whose commit failed stops
it as any failed write does (`StoreUnavailableError`): the scheduler reads the
task again and replays it from the store.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, final

from shepherd.agents.pending import HandedBack
from shepherd.core.records import Reply
from shepherd.errors import StaleEpochError, StoreUnavailableError
from shepherd.scheduler import claiming
from shepherd.store.ops import FailTask, FinishTask

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from shepherd.agents.pending import PendingReply
    from shepherd.scheduler.parts import SchedulerParts, Then
    from shepherd.store.ops import StartCompensation, WaitSignal

__all__ = [
    "Riders",
    "carry",
    "counted",
    "drop",
    "end",
    "hand_back",
    "next_write",
    "taken",
    "write",
]


def counted(pending: PendingReply, answer: bool | Reply) -> bool:
    """Whether the reply was recorded on its step as the outcome its step was handed."""
    return isinstance(answer, Reply) and answer.ok == pending.op.ok


@final
class Riders(list["PendingReply"]):
    """The replies a task's next write takes, and the waits for signals that ride with them.

    True (the write must go through `write`) when either is there.
    """

    def __init__(self, replies: list[PendingReply], found: list[tuple[WaitSignal, int]]) -> None:
        super().__init__(replies)
        #: The waits, each with the id of the signal it found.
        self.found = found

    @property
    def waits(self) -> list[WaitSignal]:
        return [wait for wait, _ in self.found]

    def __bool__(self) -> bool:
        return bool(self.found) or len(self) > 0


async def taken(parts: SchedulerParts, task_id: str, epoch: int) -> list[PendingReply]:
    """The task's offered replies, taken for its next write.

    With them (`Riders.waits`), the waits whose signal the workflow found in its
    inbox and went on with (`scheduler.signalling`): the write consumes them.

    Replies already withdrawn (being committed alone) are waited for: each
    must have counted. Those taken are the caller's to write at once
    (`write`), with no await in between; if this raises, they are handed
    back to their workers, which commit them alone.

    Raises:
        StaleEpochError: A reply the workflow went on with was not recorded.
        StoreUnavailableError: A reply's commit failed (or its outcome is unknown).
    """
    found = parts.waits.pop(task_id, None)
    carried = parts.carried.pop(task_id, [])
    entries = parts.pending.get(task_id)
    if not entries:
        parts.pending.pop(task_id, None)
        return Riders(carried, found) if found else carried
    # Taken first, so that none is withdrawn while an earlier one is waited for.
    mine = carried + [p for p in entries if p.take()]
    try:
        for pending in [p for p in entries if not p.offered and not p.taken]:
            answer = await _outcome(pending)
            if not counted(pending, answer):
                raise StaleEpochError(task_id, epoch)
            if pending in entries:  # a parallel call of the workflow may have looked first
                entries.remove(pending)
    except BaseException:
        for pending in mine:
            pending.hand_back()
        raise
    for pending in mine:
        if pending in entries:
            entries.remove(pending)
    if not entries:
        parts.pending.pop(task_id, None)
    return Riders(mine, found) if found else mine


async def _outcome(pending: PendingReply) -> bool | Reply:
    """The outcome of a withdrawn reply's commit alone, once known."""
    try:
        return await asyncio.shield(pending.done)
    except asyncio.CancelledError:
        if not pending.done.cancelled():
            raise  # this caller is cancelled
    except HandedBack:
        pass
    # Its worker stopped (or its commit was cancelled): what became of it is unknown.
    raise StoreUnavailableError("a reply's worker stopped before its commit was known")


def end(
    parts: SchedulerParts, then: FinishTask | FailTask | StartCompensation
) -> Awaitable[object]:
    """Write `then`, an end of the task's run (or its turn to compensation), with its replies.

    Not a coroutine function itself: with no reply of the task handed over (the
    common case), it hands back the store's own write, costing no extra frame.

    Raises:
        StaleEpochError: A reply did not count, or `then` is fenced off.
        StoreUnavailableError: The transaction failed, or its outcome is unknown.
    """
    if then.task_id in parts.pending or then.task_id in parts.claiming:
        return _end_with_replies(parts, then)
    store = parts.store
    if isinstance(then, FinishTask):  # the common end, with no call between
        return store.finish_task(
            then.task_id, locked_by=then.locked_by, epoch=then.epoch, result=then.result
        )
    return _end_alone(parts, then)


async def _end_with_replies(
    parts: SchedulerParts, then: FinishTask | FailTask | StartCompensation
) -> object:
    if then.task_id in parts.claiming:  # peeked, not held yet: this write claims it
        first = await claiming.first_write(parts, then.task_id, then)
        if first is not claiming.NOT_FIRST:
            return first
    replies = await taken(parts, then.task_id, then.epoch)
    if replies:
        return await write(parts, replies, then)
    return await _end_alone(parts, then)


def _end_alone(
    parts: SchedulerParts, then: FinishTask | FailTask | StartCompensation
) -> Awaitable[object]:
    store = parts.store
    if isinstance(then, FinishTask):
        return store.finish_task(
            then.task_id, locked_by=then.locked_by, epoch=then.epoch, result=then.result
        )
    if isinstance(then, FailTask):
        return store.fail_task(
            then.task_id,
            locked_by=then.locked_by,
            epoch=then.epoch,
            state=then.state,
            error=then.error,
        )
    return store.start_compensation(
        then.task_id, locked_by=then.locked_by, epoch=then.epoch, error=then.error
    )


async def write(parts: SchedulerParts, replies: list[PendingReply], then: Then) -> object:
    """Record `replies` and write `then` in one transaction; `then`'s outcome.

    The replies' workers learn how it went, whatever becomes of this caller:
    cancelled meanwhile, it hands them back and each commits its reply alone
    (the request is gone if the transaction committed it: never twice).

    Raises:
        StaleEpochError: A reply did not count (nothing of `then` was written), or
            `then` is fenced off.
        StoreUnavailableError: The transaction failed, or its outcome is unknown.
    """
    try:
        owned = [p.owned for p in replies]
        went = await parts.store.reply_then(
            [p.op for p in replies],
            then=then,
            owned=owned if any(o is not None for o in owned) else (),
            waits=replies.waits if isinstance(replies, Riders) else (),
        )
    except BaseException as exc:
        # A failed transaction is a lost reply's (its worker tries it alone through
        # the outage); anything else (this caller cancelled) has it tried alone now.
        for pending in replies:
            pending.settle(exc if isinstance(exc, StoreUnavailableError) else HandedBack())
        raise
    stale = False
    for pending, answer in zip(replies, went.replies, strict=True):
        pending.settle(answer)
        stale = stale or not counted(pending, answer)
    if stale:
        raise StaleEpochError(replies[0].task_id, replies[0].op.request.lock_epoch)
    if isinstance(went.then, Exception):
        raise went.then
    return went.then


def carry(
    parts: SchedulerParts,
    task_id: str,
    replies: list[PendingReply] | None,
    wait: WaitSignal,
    signal_id: int,
) -> None:
    """Keep `replies` (taken) and `wait` for the task's next write, which records them all.

    A wait that found its signal in the inbox goes on with it at once
    (`scheduler.signalling`); the replies taken before that look stay taken.
    """
    if replies:
        parts.carried.setdefault(task_id, []).extend(replies)
    waits = parts.waits.setdefault(task_id, [])
    if isinstance(replies, Riders):  # the waits taken with them, carried on before this one
        waits.extend(replies.found)
    waits.append((wait, signal_id))
    parts.pending.setdefault(task_id, [])  # so that the next write looks


def hand_back(replies: list[PendingReply] | None) -> None:
    """Give taken replies no write will carry back to their workers, which commit them alone."""
    for pending in replies or ():
        pending.hand_back()


def drop(parts: SchedulerParts, task_id: str) -> None:
    """A run of the task ended: what it carried for its next write goes (replies back to their
    workers, waits for signals to its next run, which finds the signals in the inbox again)."""
    parts.waits.pop(task_id, None)
    hand_back(parts.carried.pop(task_id, None))


async def next_write(
    parts: SchedulerParts, task_id: str, then: Then, pending: list[PendingReply] | None
) -> object:
    """Write `then`, the task's next write: claiming the task first if it was only peeked at
    (`scheduler.claiming`), else with the replies (and waits) `taken` for it, else alone.

    Raises:
        StaleEpochError: The claim or a reply did not count, or `then` is fenced off.
        StoreUnavailableError: The transaction failed, or its outcome is unknown.
    """
    if task_id in parts.claiming:  # peeked, not held yet (no reply can be pending then)
        first = await claiming.first_write(parts, task_id, then)
        if first is not claiming.NOT_FIRST:
            return first
    if pending:
        return await write(parts, pending, then)
    return await parts.store.write(then)
