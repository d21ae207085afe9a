"""The Scheduler role: claim tasks, run their workflows, record every step.

`scheduler` holds the claim and reply loops, `context` the `WorkflowContext` a
workflow calls its agents through, `mailbox` the replies its steps wait for,
`parts` what the contexts share with the scheduler (the mailbox among them),
`ending` how a task ends, `workflow` a registered workflow and its policy,
`wiring` the check that every agent a workflow calls is registered.
"""

from __future__ import annotations

from shepherd.scheduler.context import WorkflowContext
from shepherd.scheduler.scheduler import Scheduler
from shepherd.scheduler.workflow import Workflow

__all__ = ["Scheduler", "Workflow", "WorkflowContext"]
