"""Looks at the store: a waiting step's outcome, or a task after a fault under its run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState, StepState
from shepherd.errors import StoreUnavailableError
from shepherd.store.contract import REPLY_GRACE

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue, Task
    from shepherd.outage import Outage
    from shepherd.scheduler.parts import SchedulerParts
    from shepherd.store.roles import SchedulerStore

__all__ = ["held_again", "stored_outcome"]


async def stored_outcome(
    parts: SchedulerParts, task_id: str, epoch: int, seq: int, attempt: int, complete_by: datetime
) -> tuple[bool, JsonValue] | datetime | None:
    """Step `seq` of `task_id` as stored: its recorded outcome, a deadline to wait for, or None.

    The recorded outcome (ok, body) when a reply was recorded for this
    attempt (its wake-up was lost); a later complete_by if a heartbeat moved
    it; the same one if it has not passed yet; None when the step is past
    it or the claim (`epoch`, held by `parts.locked_by`) no longer holds
    (someone else may be retrying it).

    Raises:
        StoreUnavailableError: The store cannot be read (the caller waits it out).
    """
    task = await parts.store.get_task(task_id)
    if task is None or task.lock_epoch != epoch or task.locked_by != parts.locked_by:
        return None
    step = next((s for s in task.steps if s.seq == seq), None)
    if step is None or step.attempt != attempt:
        return None
    if step.state in (StepState.COMPLETED, StepState.COMPENSATED):
        return (True, step.result)
    if step.state is StepState.FAILED:
        return (False, step.error)
    if step.state is not StepState.RUNNING or step.complete_by is None:
        return None
    if step.complete_by > complete_by:
        return step.complete_by
    past = parts.store.now() - complete_by
    return None if past.total_seconds() >= REPLY_GRACE else complete_by


async def held_again(
    store: SchedulerStore, outage: Outage, owner: str, task: Task, cause: BaseException
) -> Task | None:
    """`task` as stored once the store answers again, if `owner`'s claim still holds it.

    The store failed under the task's run (`cause`): the outage is waited out
    (`outage`), and a write whose outcome was unknown is settled by this read.
    """
    while True:
        await outage.pause(cause)
        try:
            stored = await store.get_task(task.id)
        except StoreUnavailableError as exc:
            cause = exc
            continue
        # A read: the outage ends when the process next writes (not here, where
        # the write that follows may fail again, as on a full disk).
        outage.over(wrote=False)
        if (
            stored is None
            or stored.locked_by != owner
            or stored.lock_epoch != task.lock_epoch
            or stored.process_state not in (ProcessState.PROCESSING, ProcessState.COMPENSATING)
        ):
            return None
        return stored
