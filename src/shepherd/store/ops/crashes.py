"""Crash attribution: what a dead process held, and the supervisor's crash verdicts.

`apply_crash` never changes a task's `failure_count`: a process that died is
not its tasks' failure. A task's `crashes` only grow; a request of a suspect
task is marked `suspect`, and `take_requests` gives an agent worker at most
`suspects` such requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Lease, Task
from shepherd.store.ops.base import Read, Runs, Write, method, operation

if TYPE_CHECKING:
    from shepherd.core.supervision import Escalate, Reset

__all__ = ["ApplyCrash", "CrashVictims", "Crashes", "HeldRequest", "HeldRequests"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldRequest:
    """A request of a claimed task, queued or taken, as the supervisor weighs an expiry.

    Attributes:
        task_id: Its task.
        seq: Its step.
        lock_epoch: The claim that sent it.
        taken_by: The agent worker leasing it (`<instance>/a`), or None while queued.
        suspect: Its step runs apart from other suspects (`StepStart.suspect`).
        created_at: When it was queued (the store's clock).
        complete_by: When its window ends: a taken request is still running
            until then (a suspect's window starts when it is taken).
    """

    task_id: str
    seq: int
    lock_epoch: int
    taken_by: str | None
    suspect: bool
    created_at: datetime
    complete_by: datetime


@operation
class CrashVictims(Read[list[tuple[Task, bool, int | None]]]):
    """The tasks a dead process held: (task, owned, running).

    Tasks in a supervised state whose claim `instance`'s scheduler holds
    (`owned`), or one of whose requests `instance`'s agent had taken with a
    complete_by after `beat_at`, its last beat (`running`: the seq of that
    step, executing in that process when it died; None if none was).
    """

    instance: str
    _: KW_ONLY
    beat_at: datetime


@operation
class HeldRequests(Read[list[HeldRequest]]):
    """The unanswered requests of `task_ids`, queued or taken: who holds their steps."""

    task_ids: Sequence[str]


@operation
class ApplyCrash(Write[bool]):
    """Apply a crash verdict (`core.supervision.on_crash`), fenced like `apply_supervision`.

    Records the task's crashes and owner deaths, releases the claim (a new
    `lock_epoch`) and drops its requests. Never changes `failure_count`.
    """

    task: Task
    decision: Reset | Escalate
    _: KW_ONLY
    leader: Lease


class Crashes(Runs):
    """The store's methods for crash attribution."""

    crash_victims = method(CrashVictims)
    apply_crash = method(ApplyCrash)

    async def held_requests(self, task_ids: Sequence[str]) -> list[HeldRequest]:
        """`HeldRequests`; none asked reads nothing."""
        if not task_ids:
            return []
        return await self.read(HeldRequests(tuple(task_ids)))
