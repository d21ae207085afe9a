"""A scheduler's claims on tasks: take them, end them, give them back.

`locked_by` is the claim's holder (the seed's word: the scheduler instance
that owns the task); every write by a holder carries its `lock_epoch` and
raises `StaleEpochError`, changing nothing, once the task has moved on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from shepherd.core.records import JsonValue, Task
from shepherd.core.states import ProcessState
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "ClaimTasks",
    "Claims",
    "FailTask",
    "FinishTask",
    "NextDue",
    "PeekTasks",
    "ReleaseTasks",
    "StartCompensation",
]


@operation
class ClaimTasks(Write[list[Task]]):
    """Claim up to `limit` claimable tasks for `locked_by`, with their steps.

    A task is claimable when pending or compensating, unowned, and its
    `not_before` has passed; each goes to at most one holder, its
    `lock_epoch` bumped. The tasks in `skip` are left alone: those the
    scheduler peeked at, whose first writes claim them (`core.claiming`).
    """

    _: KW_ONLY
    locked_by: str
    limit: int
    skip: Sequence[str] = ()


@operation
class PeekTasks(Read[list[Task]]):
    """Up to `limit` tasks a claim would take first, with their steps, claiming none.

    A scheduler with little to do replays the `pending` ones at once and claims
    each with its first write (`reply_then(..., claim=...)`), so that a task's
    claim costs no transaction of its own (`core.claiming`); a compensating
    one it claims as usual.
    """

    _: KW_ONLY
    limit: int


@operation
class NextDue(Read[datetime | None]):
    """The earliest `not_before` of the unclaimed tasks waiting to run, or None.

    No wake-up rings when a task's `not_before` passes: an idle scheduler
    looks again by then.
    """


@operation
class FinishTask(Write[None]):
    """The holder's task ends `processed` with its result."""

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    result: JsonValue


@operation
class FailTask(Write[None]):
    """The holder's task ends `error`, `compensated` or `cancelled`, with the reason.

    An alert row is written with a move into `error`, in its transaction.
    """

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    state: ProcessState
    error: JsonValue


@operation
class StartCompensation(Write[None]):
    """The holder moves the task to `compensating`, keeping its claim."""

    task_id: str
    _: KW_ONLY
    locked_by: str
    epoch: int
    error: JsonValue


@operation
class ReleaseTasks(Write[int]):
    """Give claimed tasks back (graceful shutdown): unowned, epoch bumped; how many."""

    task_ids: Sequence[str]
    _: KW_ONLY
    locked_by: str


class Claims(Runs):
    """The store's methods for a scheduler's claims."""

    claim_tasks = method(ClaimTasks)
    peek_tasks = method(PeekTasks)
    next_due = method(NextDue)
    finish_task = method(FinishTask)
    fail_task = method(FailTask)
    start_compensation = method(StartCompensation)
    release_tasks = method(ReleaseTasks)
