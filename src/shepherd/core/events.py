"""The kinds of event the store writes to a task's history, as stored."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["EventKind"]


class EventKind(StrEnum):
    """What happened to a task: one entry of its append-only history."""

    #: The task was submitted.
    RECEIVED = "received"
    #: A scheduler claimed it (a compensating task too).
    CLAIMED = "claimed"
    #: An agent's reply to a step: the step succeeded.
    STEP_COMPLETED = "step_completed"
    #: An agent's reply to a step: the step failed.
    STEP_FAILED = "step_failed"
    #: An agent ran out of tries and replied nothing (noted by the agent).
    STEP_GAVE_UP = "step_gave_up"
    #: An agent was cancelled at `complete_by` and replied nothing (noted by the agent).
    STEP_TIMED_OUT = "step_timed_out"
    #: The workflow returned its result.
    PROCESSED = "processed"
    #: The task turned to compensation (its owner, or the supervisor).
    COMPENSATING = "compensating"
    #: Compensation finished: every undo ran.
    COMPENSATED = "compensated"
    #: Compensation of an operator's cancel finished.
    CANCELLED = "cancelled"
    #: The task ended in `error` (its owner, or the supervisor's escalation).
    ERROR = "error"
    #: The supervisor released an expired claim: the task is claimable again.
    RESET = "reset"
    #: An operator retried a task in `error`.
    RETRIED = "retried"
    #: An operator asked for the task's cancellation.
    CANCEL_REQUESTED = "cancel_requested"
    #: An operator acknowledged the task's open alerts (a bulk acknowledgement).
    ALERT_ACKNOWLEDGED = "alert_acknowledged"
    #: The workflow went to sleep (`ctx.sleep`): its claim given up until its wake-up.
    SLEEPING = "sleeping"
    #: A step started a child workflow (`core.children`).
    CHILD_STARTED = "child_started"
    #: The workflow gave up its claim until one of the children it awaits ends.
    WAITING_CHILDREN = "waiting_children"
    #: An awaited child ended: its step records the child's result or reason.
    CHILD_ENDED = "child_ended"
    #: An operator woke a sleeping task before its wake-up.
    WOKEN = "woken"
    #: A signal was sent to the task (`app.signal`): recorded, consumed by a wait now or later.
    SIGNALLED = "signalled"
    #: The workflow waits for a signal (`ctx.wait_for`): its claim given up meanwhile.
    WAITING = "waiting"
    #: A wait consumed a signal: the signal's payload is the wait's step result.
    SIGNAL_RECEIVED = "signal_received"
    #: A wait reached its timeout with no signal: the workflow gets `SignalTimeoutError`.
    SIGNAL_TIMED_OUT = "signal_timed_out"
