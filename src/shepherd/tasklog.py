"""One INFO line per task event, on the `shepherd.tasks` logger.

Claims, steps started, completed and failed, and how each task ends, as the
roles record them: `task 01a2... orders.process: step 2 payments.charge
attempt 1 completed`. Replayed steps are not logged (nothing happened).
"""

from __future__ import annotations

import logging

__all__ = ["log", "step_event", "task_event"]

log = logging.getLogger("shepherd.tasks")


def task_event(task_id: str, workflow: str, event: str, reason: object = None) -> None:
    """Log `event` (claimed, processed, error, ...) of a task, with its reason if any."""
    if reason is None:
        log.info("task %s %s: %s", task_id, workflow, event)
    else:
        log.info("task %s %s: %s: %s", task_id, workflow, event, reason)


def step_event(
    task_id: str,
    workflow: str,
    *,
    seq: int,
    agent: str,
    attempt: int,
    event: str,
    compensates: int | None = None,
    reason: object = None,
) -> None:
    """Log `event` (started, completed, failed) of step `seq` of a task."""
    if not log.isEnabledFor(logging.INFO):
        return
    what = agent if compensates is None else f"{agent} (undo of step {compensates})"
    if reason is None:
        log.info(
            "task %s %s: step %d %s attempt %d %s", task_id, workflow, seq, what, attempt, event
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
        )
