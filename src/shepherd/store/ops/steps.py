"""Steps: start one (its request queued in the same transaction), record replies, extend one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace
from datetime import datetime

from shepherd.core.records import JsonValue, Reply, Request
from shepherd.core.resources import Resolution
from shepherd.core.states import StepKind
from shepherd.store.ops.base import Runs, Write, method, operation
from shepherd.store.ops.children import EndChild, StartChild, WaitChildren
from shepherd.store.ops.claims import FailTask, FinishTask, StartCompensation
from shepherd.store.ops.owners import AnswerOwned
from shepherd.store.ops.queues import ReplyAndAck
from shepherd.store.ops.signalling import WaitSignal

__all__ = [
    "REPLY_GRACE",
    "ExtendStep",
    "OwnerTake",
    "RecordReplies",
    "ReplyThen",
    "SleepTask",
    "StartStep",
    "StepStart",
    "Steps",
    "Went",
]

#: Seconds past a step's complete_by that its task's claim still holds: time for a
#: reply written at the deadline to be recorded. The scheduler waits as long.
REPLY_GRACE = 0.5


@dataclass(frozen=True, slots=True)
class OwnerTake:
    """A step's request handed to its key's owner as it is queued, behind the owner's fence.

    Its start takes the request for the owner's `worker` only if, in the
    start's own transaction, `owner` holds the key's live lease at `epoch` and
    no other request of the key waits (unexpired and not taken by `worker`):
    a key's requests are still handled in the order they were queued, across
    processes. Otherwise the request is queued as any keyed one is (untaken,
    and the key's owner is woken: `take_key_work` takes it).
    """

    #: The owner process's agent worker name: the requests its takes lease to.
    worker: str
    #: The owner's name in key leases (`owner_of`).
    owner: str
    #: The ownership's epoch the fence checks.
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStart:
    """What `start_step` writes: the step `running` and its request, fenced by epoch."""

    task_id: str
    #: The claim's holder (`Task.locked_by`), whose `epoch` fences the write.
    locked_by: str
    epoch: int
    seq: int
    agent: str
    payload: JsonValue
    within: float
    attempt: int
    kind: StepKind = StepKind.FORWARD
    undo: str | None = None
    compensates: int | None = None
    #: A retry policy for this call only (`RetryPolicy.to_json()`), or None.
    retry: JsonValue = None
    #: This step was running at a crash: its request is marked suspect, to run apart
    #: from other suspects.
    suspect: bool = False
    #: Seconds added to the step's first window for waiting in the queue (a suspect
    #: waits for an agent that runs no other suspect; the agent then restarts the
    #: window when it takes the request).
    queue_allowance: float = 0.0
    #: Where the call's entity lives (resolved when the step was first sent, then
    #: the recorded one on every later attempt): written on the step and its request.
    resolution: Resolution | None = None
    #: The trace context of the task run sending it (`shepherd.tracing`), written on
    #: its request, or None when not traced.
    trace: str | None = None
    #: The agent worker of the scheduler's own process that takes the request as it
    #: is queued (`start_step_taken`): leased to it until complete_by, as
    #: `take_requests` would lease it, and never seen by other workers. None queues it.
    #: An `OwnerTake` (a step with an `owner_key`): its key's owner in this process
    #: takes it, if its fence holds (`start_step_owned`), else it is queued.
    taken_by: str | OwnerTake | None = None
    #: The owning key of a step that calls an exclusive agent: its request is taken
    #: only by that key's owner (`take_key_work`), never by an agent worker. A key's
    #: requests are queued one transaction at a time (their ids rise in commit order).
    owner_key: str | None = None


@operation
class StartStep(Write[datetime | Request]):
    """Mark the step running and enqueue its request, in one transaction; its complete_by.

    With `start.taken_by`, the `Request` itself, leased to that worker as it
    is queued: hidden until its complete_by, exactly as if the worker had
    taken it with `take_requests`, and no other worker is woken for it. With
    an `OwnerTake`, the `Request` only where the owner's fence holds (see
    `OwnerTake`): taken by its worker as `take_key_work` would take it, and no
    owner is woken; else its complete_by, the request queued untaken.
    """

    start: StepStart


@operation
class RecordReplies(Write[list[tuple[Reply, bool]]]):
    """Take up to `limit` replies for tasks `locked_by` holds and record them.

    A reply for the current epoch and attempt of a running step marks it
    `completed` (or `failed`), exactly once, and is paired with True; any
    other reply is discarded and paired with False. Every reply taken is
    removed.
    """

    _: KW_ONLY
    locked_by: str
    limit: int


@dataclass(frozen=True, slots=True)
class Went:
    """What `reply_then` did: each reply's outcome, then its next write's."""

    #: Per reply, in order: what `reply_and_ack` returns for it (a `Reply` when it counted).
    replies: tuple[bool | Reply, ...]
    #: What `then` returns (its complete_by, its `Request`, or None for the others), or the
    #: error its caller gets: `StaleEpochError` when a reply did not count (then
    #: nothing of `then` was written) or when `then` itself is fenced off.
    then: object


@operation
class SleepTask(Write[None]):
    """The holder records sleep step `seq` until `wake_at` and gives up its claim.

    In one transaction, fenced by `locked_by` and `epoch` (else
    `StaleEpochError`, nothing written): the step, kind `sleep`, `completed`,
    its `complete_by` the wake-up (one already recorded at `seq` is kept as
    it is), and the task `pending`, unowned, `not_before` = `wake_at`, with
    a `sleeping` event. The claim path wakes it then (`core.sleeping`).
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    seq: int
    wake_at: datetime


@operation
class ReplyThen(Write[Went]):
    """Record replies made in this process, then write `then`, in ONE transaction.

    Each reply is written exactly as `reply_and_ack` writes it (its request
    removed, its slot released, and, since its `recorder` holds the task,
    recorded on its step with the same checks: the request still taken by its
    worker and unexpired, the task's epoch and the step's attempt current).
    `then`, the next write of the same task (the start of its next step, its
    sleep or wait for a signal, a child's start or the wait for children, a child's end,
    its finish, its failure into `error`, `compensated` or `cancelled`, or the
    start of its compensation), is written only if EVERY reply counted as the result (or failure)
    it was handed over as; otherwise nothing of it is written and its outcome is
    `StaleEpochError`. A stale reply is thus recorded nowhere and starts nothing.

    A reply made by an exclusive key's owner (a step through an exclusive
    agent) comes with its owner's fence and owner state (`owned`, one per
    reply, None for the others): as `ReplyOwned` writes it, the state is set
    and the reply written only while the owner holds the key's live lease at
    its epoch; otherwise neither is, and the reply's outcome is False (it did
    not count).

    A task peeked (`peek_tasks`) and replayed before it was claimed is claimed
    by its first write: with `claim`, its lock_epoch as peeked, `then.locked_by`
    claims `then`'s task first, exactly as `claim_tasks` would (epoch bumped,
    `complete_by` set, `processing`, a `claimed` event), but only while it is
    still `pending`, unowned, due and at that epoch; `then` (whose epoch is the
    bumped one) is written only if the claim was. Otherwise nothing is, and the
    outcome of `then` is `StaleEpochError`: another holder took the task.
    `replies` is then empty (no step of this run could have replied).
    """

    replies: Sequence[ReplyAndAck]
    _: KW_ONLY
    then: (
        StartStep
        | FinishTask
        | FailTask
        | StartCompensation
        | SleepTask
        | WaitSignal
        | StartChild
        | WaitChildren
        | EndChild
    )
    #: Per reply, its owner's fence and state (`answers` empty), or None; empty: none.
    owned: Sequence[AnswerOwned | None] = ()
    #: The lock_epoch `then`'s task was peeked at, to claim it first; None: it is held.
    claim: int | None = None
    #: Waits for signals the workflow found in its inbox and went on with: each
    #: consumes its signal (as `wait_signal` does) after the replies and before
    #: `then`, which is written only if every one of them `received` it.
    waits: Sequence[WaitSignal] = ()


@operation
class ExtendStep(Write[datetime | None]):
    """A heartbeat: move the running step's deadlines one window (`request.within`) ahead.

    Fenced: only while the request row still exists, taken by `worker` and
    not past its complete_by, its step is `running` with the request's
    attempt, and the task is claimed at the request's `lock_epoch`. Then the
    step's complete_by, the request's complete_by and visible_at become now +
    `within` (store clock) and the task's complete_by at least that plus
    REPLY_GRACE. Returns the new complete_by, or None when the execution was
    superseded (or the request has no window), in which case nothing changes.
    """

    request: Request
    _: KW_ONLY
    worker: str


class Steps(Runs):
    """The store's methods for steps."""

    record_replies = method(RecordReplies)
    reply_then = method(ReplyThen)
    extend_step = method(ExtendStep)
    sleep_task = method(SleepTask)

    async def start_step(self, start: StepStart) -> datetime:
        """`StartStep` queued for any worker: the step's complete_by."""
        started = await self.write(StartStep(start))
        assert isinstance(started, datetime), "start_step with taken_by: use start_step_taken"
        return started

    async def start_step_taken(self, start: StepStart, *, worker: str) -> Request:
        """`StartStep` with its request leased to `worker` as it is queued: the request."""
        started = await self.write(StartStep(replace(start, taken_by=worker)))
        assert isinstance(started, Request)
        return started

    async def start_step_owned(self, start: StepStart, *, take: OwnerTake) -> datetime | Request:
        """`StartStep` of a keyed step handed to its key's owner (`OwnerTake`): the
        `Request` when the owner's worker took it, else the step's complete_by (queued)."""
        return await self.write(StartStep(replace(start, taken_by=take)))
