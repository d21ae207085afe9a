"""`ctx.sleep` and `ctx.sleep_until`: a workflow waits holding no claim and no slot.

This is the one way a task waits without its claim. `core.sleeping` decides;
here the decision is carried out: a sleep not over yet is recorded as a step
(kind `sleep`, its wake-up instant stored) and the claim given up in ONE
transaction (`SleepTask`), which also carries the replies this workflow went on
with before their commit (`scheduler.replied`), so a sleep adds no transaction
a step does not. The run then stops (`Slept`); the claim path wakes the task at
its `not_before`, and the replayed workflow finds the sleep over and goes on.

Refused, each with a `ConfigError` naming it: a negative, NaN, infinite or
overlong duration; a naive datetime; a sleep while other calls of the workflow
are in flight (`asyncio.gather`), which also refuses a sleep from an agent's
handler that got hold of a context (its step is in flight). A compensation runs undo agents,
not workflow code: it has no context to sleep with.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from shepherd.core import sleeping
from shepherd.core.replay import NonDeterminism
from shepherd.errors import ConfigError, NonDeterminismError, StaleEpochError, StoreUnavailableError
from shepherd.scheduler import replied
from shepherd.scheduler.stops import Abandoned, StoreLost
from shepherd.store.ops import SleepTask
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import Step, Task
    from shepherd.scheduler.parts import SchedulerParts

__all__ = ["Sleeper", "Slept", "sleep", "sleep_until"]


class Sleeper(Protocol):
    """What a sleep needs of its `WorkflowContext`."""

    task: Task
    task_id: str
    epoch: int
    #: The steps recorded so far, by seq.
    steps: dict[int, Step]
    #: The tasks running a call of the workflow right now.
    _in_flight: set[asyncio.Task[object]]


class Slept(Abandoned):
    """The task went to sleep: its claim is given up, so this run stops here."""


async def sleep(ctx: Sleeper, parts: SchedulerParts, seq: int, seconds: object) -> None:
    """`ctx.sleep(seconds)` at `seq`.

    Raises:
        ConfigError: `seconds` is refused (`core.sleeping.wake_at_after`), or the
            sleep is not allowed here (see the module's docstring).
    """
    try:
        wake_at = sleeping.wake_at_after(seconds, now=parts.store.now())
    except ValueError as exc:
        raise ConfigError("seconds", str(exc)) from None
    await _sleep(ctx, parts, seq, wake_at)


async def sleep_until(ctx: Sleeper, parts: SchedulerParts, seq: int, when: object) -> None:
    """`ctx.sleep_until(when)` at `seq`.

    Raises:
        ConfigError: `when` is refused (`core.sleeping.checked_until`), or the
            sleep is not allowed here.
    """
    try:
        wake_at = sleeping.checked_until(when)
    except ValueError as exc:
        raise ConfigError("when", str(exc)) from None
    await _sleep(ctx, parts, seq, wake_at)


async def _sleep(ctx: Sleeper, parts: SchedulerParts, seq: int, wake_at: datetime) -> None:
    """Return at once if the sleep at `seq` is over; else record it, give up the claim, stop."""
    me = asyncio.current_task()
    if any(t is not me and not t.done() for t in ctx._in_flight):
        raise ConfigError(
            "ctx.sleep",
            "a sleep while a call of the workflow is in flight is refused: from a parallel "
            "branch (asyncio.gather), await the calls first; from an agent's handler (which "
            "holds a worker slot while it runs), return instead and sleep in the workflow",
        )
    decision = sleeping.decide(ctx.steps.get(seq), seq, wake_at, now=parts.store.now())
    if isinstance(decision, NonDeterminism):
        raise NonDeterminismError(ctx.task_id, seq, decision.recorded, decision.called)
    if isinstance(decision, sleeping.Awake):
        return
    op = SleepTask(
        ctx.task_id,
        locked_by=parts.locked_by,
        epoch=ctx.epoch,
        seq=seq,
        wake_at=decision.wake_at,
    )
    try:
        pending = (
            await replied.taken(parts, ctx.task_id, ctx.epoch)
            if ctx.task_id in parts.pending
            else None
        )
        await replied.next_write(parts, ctx.task_id, op, pending)
    except StaleEpochError as exc:
        raise Abandoned from exc
    except StoreUnavailableError as exc:
        raise StoreLost(exc) from exc
    task_event(ctx.task_id, ctx.task.workflow, "sleeping", f"until {op.wake_at.isoformat()}")
    raise Slept
