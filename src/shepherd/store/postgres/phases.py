"""Handlers in two phases, so that a batch of them waits for the server once.

A phased handler's first phase sends every statement whose rows it needs (its
reads, and the writes it reads back: a claim's UPDATE ... RETURNING, an
acknowledgement's DELETE ... RETURNING) and reads nothing; it returns its
second phase, which reads those rows and sends the writes that depend on them.
The writer runs the first phases of every kind in the batch, then the second
phases: the first row read brings back the answers to all the reads at once
(one round trip), and the writes go out with the commit.

The batch is then the same as if its kinds had run whole, one after another,
in `ORDER`: a kind's reads see nothing that an earlier kind writes in its second
phase. That holds because, in this order, no kind reads rows that an earlier
kind's second phase writes: a request is taken or answered before a step's
start drops or queues one; a reply is recorded before that step starts again
(a `reply_then` reads only its replies' own steps and its tasks' fencing
columns, which no earlier kind changes);
the owners a step's start or a finish lock are read before a finish unlocks
them; a claim and a take touch rows the others never write in the same batch
(unowned tasks, requests not yet taken), a take of calls only calls, and a
submit only new rows.

A batch with any kind that is not phased (or whose handler a test replaced)
runs each kind whole, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from shepherd.store.ops import (
    AcquireLease,
    BeatWorker,
    ClaimTasks,
    FinishTask,
    RecordReplies,
    ReplyAndAck,
    ReplyThen,
    StartStep,
    SubmitTask,
    SubmitTasks,
    TakeCalls,
    TakeRequests,
    Write,
)
from shepherd.store.postgres.batch import WRITES, PostgresBatch

__all__ = ["ORDER", "Second", "phased", "phases_of"]

W = TypeVar("W", bound=Write[Any])

#: A handler's second phase: reads its rows, sends its writes, returns the outcomes.
Second = Callable[[], Awaitable[list[object]]]
#: A handler's first phase: sends what it must read; returns its second phase.
First = Callable[[PostgresBatch, Sequence[Any]], Awaitable[Second]]

#: The kinds that may share one round trip, in the order they are taken to run.
ORDER: tuple[type[Write[Any]], ...] = (
    TakeRequests,
    TakeCalls,
    ClaimTasks,
    SubmitTask,
    SubmitTasks,
    RecordReplies,
    ReplyAndAck,
    ReplyThen,
    StartStep,
    FinishTask,
    BeatWorker,
    AcquireLease,
)
_RANK = {kind: rank for rank, kind in enumerate(ORDER)}

_FIRST: dict[type[Write[Any]], First] = {}
#: The whole handler registered for each phased kind (both phases, one after the other).
_WHOLE: dict[
    type[Write[Any]], Callable[[PostgresBatch, Sequence[Any]], Awaitable[list[object]]]
] = {}


def phased(kind: type[W]) -> Callable[[First], First]:
    """Register `first` as `kind`'s first phase, and both phases as its handler (`WRITES`)."""
    assert kind in _RANK, f"{kind.__name__} has no place in phases.ORDER"

    def register(first: First) -> First:
        async def whole(batch: PostgresBatch, ops: Sequence[Any]) -> list[object]:
            return await (await first(batch, ops))()

        whole.__doc__ = first.__doc__
        WRITES.handles(kind)(whole)
        _FIRST[kind] = first
        _WHOLE[kind] = whole
        return first

    return register


def phases_of(kinds: Sequence[type[Write[Any]]]) -> list[tuple[type[Write[Any]], First]] | None:
    """The first phases of `kinds` in `ORDER`, or None if one of them is not phased."""
    if any(kind not in _FIRST or WRITES[kind] is not _WHOLE[kind] for kind in kinds):
        return None
    return [(kind, _FIRST[kind]) for kind in sorted(kinds, key=_RANK.__getitem__)]
