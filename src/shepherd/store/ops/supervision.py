"""A claim's supervision: the claims whose complete_by passed, and the supervisor's verdicts."""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Lease, Task
from shepherd.store.ops.base import Read, Runs, Write, method, operation

if TYPE_CHECKING:
    from shepherd.core.supervision import Decision

__all__ = ["ApplySupervision", "CancelOverdue", "ExpiredClaims", "NextDeadline", "Supervision"]


@operation
class ExpiredClaims(Read[list[Task]]):
    """Owned tasks whose complete_by has passed (store clock), at most `limit`."""

    _: KW_ONLY
    limit: int


@operation
class ApplySupervision(Write[bool]):
    """Apply a supervisor decision, fenced twice: by the task's `lock_epoch` and by leadership.

    True where the task was changed. An escalation into `error` writes its
    alert row in the same transaction, and only when the write took place.
    """

    task: Task
    decision: Decision
    _: KW_ONLY
    leader: Lease


@operation
class CancelOverdue(Write[list[Task]]):
    """Cancel the tasks whose deadline has passed (store clock), at most `limit`, earliest first.

    Only while `leader` still holds its lease (the same fence as
    `ApplySupervision`'s). A task pending or processing at its deadline turns
    `compensating`, to end `cancelled`, as an operator's cancel does
    (`core.timing.on_deadline`): released and claimable at once under a new
    `lock_epoch` (its owner is fenced off), its error `deadline passed` unless
    it had one, a `cancel_requested` event with that reason, its queued
    requests dropped. A task in `error`, compensating or ended is left alone.
    Returns the tasks cancelled, as written.
    """

    _: KW_ONLY
    leader: Lease
    limit: int


@operation
class NextDeadline(Read[datetime | None]):
    """The earliest deadline of the tasks `CancelOverdue` would cancel at it, or None.

    One index-only read: an idle supervisor's scan writes nothing for deadlines.
    """


class Supervision(Runs):
    """The store's methods for a claim's supervision, and for deadlines."""

    expired_claims = method(ExpiredClaims)
    apply_supervision = method(ApplySupervision)
    cancel_overdue = method(CancelOverdue)
    next_deadline = method(NextDeadline)
