"""A claim's supervision: the claims whose complete_by passed, and the supervisor's verdicts."""

from __future__ import annotations

from dataclasses import KW_ONLY
from typing import TYPE_CHECKING

from shepherd.core.records import Lease, Task
from shepherd.store.ops.base import Read, Runs, Write, method, operation

if TYPE_CHECKING:
    from shepherd.core.supervision import Decision

__all__ = ["ApplySupervision", "ExpiredClaims", "Supervision"]


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


class Supervision(Runs):
    """The store's methods for a claim's supervision."""

    expired_claims = method(ExpiredClaims)
    apply_supervision = method(ApplySupervision)
