"""How a claimed task ends: its result recorded, its steps undone, or its error stored.

The scheduler runs a task's workflow; what the workflow returned or raised is
ended here, with the scheduler's parts and the task's context: `finish` records
the result, `failed` tells a refusal (undone: `compensate`) from a bug or an
unknown outcome (`error`, and an operator alert).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from shepherd.core import compensation, replay
from shepherd.core.alerts import fail_reason
from shepherd.core.children import may_cancel
from shepherd.core.events import EventKind
from shepherd.core.states import ProcessState, StepKind
from shepherd.errors import (
    NonDeterminismError,
    OutcomeUnknownError,
    PermanentError,
    StepBugError,
    UnknownAgentError,
)
from shepherd.failures import error_body, format_traceback
from shepherd.scheduler import children, replied
from shepherd.store.ops import FailTask, FinishTask, StartCompensation
from shepherd.tasklog import task_event, task_fields

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.scheduler.context import WorkflowContext
    from shepherd.scheduler.parts import SchedulerParts

__all__ = ["compensate", "error", "failed", "finish"]

log = logging.getLogger("shepherd.scheduler")


async def finish(parts: SchedulerParts, ctx: WorkflowContext, result: JsonValue) -> None:
    """The workflow returned `result`: the task is `processed`."""
    task = ctx.task
    if may_cancel(ctx.steps.values()):  # children that go with it (`scheduler.children`)
        await children.parent_ends(parts, ctx)
    # The last replies, if the workflow went on with them before their commit, ride along
    # (a child's end also records its parent's step: `scheduler.children`).
    await children.end(
        parts, FinishTask(task.id, locked_by=parts.locked_by, epoch=ctx.epoch, result=result)
    )
    task_event(task.id, task.workflow, EventKind.PROCESSED, epoch=ctx.epoch)
    parts.counters.ended(task.workflow, ProcessState.PROCESSED)
    if ctx.traced is not None:
        ctx.traced.ended(ProcessState.PROCESSED)


async def failed(parts: SchedulerParts, ctx: WorkflowContext, exc: Exception) -> None:
    """The workflow raised `exc`: a step refused is undone, anything else is an error."""
    task = ctx.task
    if isinstance(exc, StepBugError):
        # A bug, not a refusal: nothing is undone before an operator has looked.
        await error(
            parts,
            ctx,
            {
                "reason": exc.message,
                "type": exc.error_type,
                "message": _told(exc.detail),
                "seq": exc.seq,
                "agent": exc.agent,
                "tries": exc.tries,
                "traceback": exc.traceback,
            },
        )
    elif isinstance(exc, OutcomeUnknownError):
        # An effect may have happened: the operator checks before anything is undone.
        await error(
            parts,
            ctx,
            {
                "reason": f"step {exc.seq} ({exc.agent}) has an unknown outcome: {exc.message}",
                "type": type(exc).__name__,
                "seq": exc.seq,
                "agent": exc.agent,
                "detail": exc.detail,
            },
        )
    elif isinstance(exc, PermanentError):
        refused = {
            "reason": f"step {exc.seq} ({exc.agent}) failed permanently: {exc.message}",
            "seq": exc.seq,
            "agent": exc.agent,
            "detail": exc.detail,
        }
        await replied.end(
            parts,
            StartCompensation(task.id, locked_by=parts.locked_by, epoch=ctx.epoch, error=refused),
        )
        task_event(
            task.id,
            task.workflow,
            EventKind.COMPENSATING,
            refused["reason"],
            epoch=ctx.epoch,
            step=None if exc.seq is None else ctx.steps.get(exc.seq),
        )
        await compensate(parts, ctx, refused)
    elif isinstance(exc, (NonDeterminismError, UnknownAgentError)):
        await error(parts, ctx, {"reason": exc.message, "type": type(exc).__name__})
    else:
        log.error(
            "task %s %s: the workflow raised %s: %s",
            task.id,
            task.workflow,
            type(exc).__name__,
            exc,
            exc_info=exc,
            extra=task_fields(task.id, task.workflow, epoch=task.lock_epoch),
        )
        body = error_body(exc)
        await error(
            parts,
            ctx,
            {
                "reason": f"workflow raised {body['type']}: {body['message']}",
                "type": body["type"],
                "message": body["message"],
                "traceback": format_traceback(exc),
            },
        )


async def compensate(parts: SchedulerParts, ctx: WorkflowContext, reason: JsonValue) -> None:
    """Run the undo agents of the task's completed steps, newest first."""
    for undo in compensation.plan(list(ctx.steps.values())):
        recorded = ctx.steps.get(undo.seq)
        decision = replay.decide(recorded, undo.agent, undo.seq)
        if isinstance(decision, replay.Replay):
            continue
        if isinstance(decision, replay.Run):
            # The undo acts where its forward step did: on that step's resolution.
            forward = ctx.steps.get(undo.compensates)
            try:
                await ctx.run_step(
                    seq=undo.seq,
                    agent=undo.agent,
                    payload=undo.payload,
                    within=None,
                    attempt=decision.attempt,
                    kind=StepKind.UNDO,
                    compensates=undo.compensates,
                    resolution=None if forward is None else forward.resolution,
                )
                continue
            except StepBugError as exc:
                undo_error: Any = exc.detail
                why = f"raised {exc.error_type}: {_told(exc.detail)} (a bug)"
            except PermanentError as exc:
                undo_error = exc.detail
                why = "failed"
        else:
            undo_error = getattr(decision, "error", repr(decision))
            why = "failed"
        await error(
            parts,
            ctx,
            {
                "reason": f"compensation could not finish: undo {undo.agent!r} of step "
                f"{undo.compensates} {why}",
                "undo_error": undo_error,
                "cause": reason,
            },
        )
        return
    final = ProcessState.CANCELLED if ctx.task.cancel_requested else ProcessState.COMPENSATED
    if may_cancel(ctx.steps.values()):
        await children.parent_ends(parts, ctx)
    await children.end(
        parts,
        FailTask(
            ctx.task_id, locked_by=parts.locked_by, epoch=ctx.epoch, state=final, error=reason
        ),
    )
    task_event(ctx.task_id, ctx.task.workflow, str(final), epoch=ctx.epoch)
    parts.counters.ended(ctx.task.workflow, final)
    if ctx.traced is not None:
        ctx.traced.ended(final, fail_reason(reason))


async def error(parts: SchedulerParts, ctx: WorkflowContext, reason: dict[str, Any]) -> None:
    """The task ends in `error` with `reason`, and an operator is alerted.

    Its children go on: `error` waits for an operator, who may retry the task.
    """
    await replied.end(
        parts,
        FailTask(
            ctx.task_id,
            locked_by=parts.locked_by,
            epoch=ctx.epoch,
            state=ProcessState.ERROR,
            error=reason,
        ),
    )
    seq = reason.get("seq")
    task_event(
        ctx.task_id,
        ctx.task.workflow,
        EventKind.ERROR,
        reason.get("reason"),
        epoch=ctx.epoch,
        step=ctx.steps.get(seq) if isinstance(seq, int) else None,
    )
    parts.counters.ended(ctx.task.workflow, ProcessState.ERROR)
    if ctx.traced is not None:
        ctx.traced.ended(ProcessState.ERROR, fail_reason(reason))
    # The same reason as the alert `fail_task` stored with the task.
    parts.raise_alert(ctx.task, reason=fail_reason(reason))


def _told(detail: JsonValue) -> JsonValue:
    """The `message` of a step's stored error, if it has one."""
    return detail.get("message") if isinstance(detail, dict) else None
