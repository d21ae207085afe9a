"""One INFO line per task event, on the `shepherd.tasks` logger; the fields of a task's lines.

Claims, steps started, completed and failed, and how each task ends, as the
roles record them: `task 01a2... orders.process: step 2 payments.charge
attempt 1 completed`. Replayed steps are not logged (nothing happened).

Every line any role logs about a task passes `task_fields(...)` (or
`request_fields(request)`) as `extra=`: `task_id`, `workflow`, `seq`, `agent`,
`attempt`, `epoch` (the claim's `lock_epoch`), None where the line does not
concern one step (a claim, the task's end) or the role does not know it (an
agent's request names its task and step, not the workflow). The text format
does not show them; `--log-format json` writes them as fields. Only ids and
counters go there: never a payload or a result.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shepherd.core.records import Request, Step

__all__ = ["log", "request_fields", "step_event", "task_event", "task_fields"]

log = logging.getLogger("shepherd.tasks")


def task_fields(
    task_id: str,
    workflow: str | None,
    *,
    epoch: int | None,
    seq: int | None = None,
    agent: str | None = None,
    attempt: int | None = None,
) -> dict[str, object]:
    """The `extra=` of a log line about a task (and one of its steps, if given)."""
    return {
        "task_id": task_id,
        "workflow": workflow,
        "seq": seq,
        "agent": agent,
        "attempt": attempt,
        "epoch": epoch,
    }


def request_fields(request: Request) -> dict[str, object]:
    """The `extra=` of an agent's log line about the step `request` asks for."""
    return task_fields(
        request.task_id,
        None,
        epoch=request.lock_epoch,
        seq=request.seq,
        agent=request.agent,
        attempt=request.attempt,
    )


def task_event(
    task_id: str,
    workflow: str,
    event: str,
    reason: object = None,
    *,
    epoch: int | None = None,
    step: Step | None = None,
) -> None:
    """Log `event` (claimed, processed, error, ...) of a task, with its reason if any.

    Args:
        task_id: The task's id.
        workflow: The task's workflow.
        event: What happened.
        reason: Why, if anything says why.
        epoch: The `lock_epoch` of the claim (or of the reset) the event ends.
        step: The step the event comes from, if one does (the step whose
            failure sends the task to compensation or to `error`).
    """
    if not log.isEnabledFor(logging.INFO):
        return
    extra = task_fields(
        task_id,
        workflow,
        epoch=epoch,
        seq=None if step is None else step.seq,
        agent=None if step is None else step.agent,
        attempt=None if step is None else step.attempt,
    )
    extra["event"] = str(event)
    if reason is None:
        log.info("task %s %s: %s", task_id, workflow, event, extra=extra)
    else:
        log.info("task %s %s: %s: %s", task_id, workflow, event, reason, extra=extra)


def step_event(
    task_id: str,
    workflow: str,
    *,
    seq: int,
    agent: str,
    attempt: int,
    event: str,
    epoch: int | None = None,
    compensates: int | None = None,
    reason: object = None,
) -> None:
    """Log `event` (started, completed, failed) of step `seq` of a task."""
    if not log.isEnabledFor(logging.INFO):
        return
    what = agent if compensates is None else f"{agent} (undo of step {compensates})"
    extra = task_fields(task_id, workflow, epoch=epoch, seq=seq, agent=agent, attempt=attempt)
    extra["event"] = event
    if reason is None:
        log.info(
            "task %s %s: step %d %s attempt %d %s",
            task_id,
            workflow,
            seq,
            what,
            attempt,
            event,
            extra=extra,
        )
    else:
        log.info(
            "task %s %s: step %d %s attempt %d %s: %s",
            task_id,
            workflow,
            seq,
            what,
            attempt,
            event,
            reason,
            extra=extra,
        )
