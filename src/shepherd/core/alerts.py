"""Stored operator alerts: which writes raise one, what resolves it, and the record an operator reads.

A task that moves into `error` needs an operator. The write that moves it
there (a supervisor's `Escalate`, a crash verdict that quarantines it, its
owner failing it into `error`) also stores an alert, in the same transaction,
so that the alert outlives the process that raised it. `Raised` is what such a
write stores: the same reason and failure count the alert sinks are sent
(`shepherd.alerts.Alert`). `StoredAlert` is the row as an operator lists it.

A task has at most one open alert: raised again while it is open (the task
was retried and failed again), the alert counts it (`times_raised`) and takes
the latest reason and failure count. An alert is open, then acknowledged by
an operator (it needs no more attention), and resolved when its task later
ends in any state but `error` (`resolution` says by what): an acknowledged
alert resolves too, keeping its acknowledgement. Once acknowledged or
resolved, a new failure of the task opens a new alert.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, final

from shepherd.core.states import ProcessState
from shepherd.core.supervision import Escalate

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue
    from shepherd.core.supervision import Decision

__all__ = [
    "RESOLVING_STATES",
    "AlertState",
    "Raised",
    "StoredAlert",
    "fail_reason",
    "on_decision",
    "on_fail",
    "resolution",
]


class AlertState(StrEnum):
    """Where an alert stands: open, acknowledged by an operator, or resolved by its task's end."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


#: The states a task ends well in: its alerts not yet resolved resolve themselves.
RESOLVING_STATES: frozenset[str] = frozenset(
    {ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED}
)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Raised:
    """The alert a write stores with its task: why, and the failure count reported."""

    reason: str
    failure_count: int


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StoredAlert:
    """An operator alert as the store keeps it.

    Attributes:
        id: The alert's number, growing with each alert raised.
        task_id: The task that needs an operator.
        workflow: Its workflow.
        key: Its business key, if it has one.
        reason: Why, as the alert sinks were last told (the latest failure's).
        failure_count: Expirations and failures when it was last raised.
        raised_at: When its task first moved into `error` (store clock).
        acknowledged_at: When an operator acknowledged it; None if none did.
        acknowledged_by: Who acknowledged it; None if none did.
        state: Open, acknowledged or resolved.
        times_raised: How many times its task moved into `error` while it was open.
        last_raised_at: When it was last raised again; None while raised once.
        resolved_at: When its task ended well, resolving it (store clock); None until then.
        resolved_by: What resolved it (`task processed`, `task cancelled by anna`).
    """

    id: int
    task_id: str
    workflow: str
    key: str | None
    reason: str
    failure_count: int
    raised_at: datetime
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    state: AlertState = AlertState.OPEN
    times_raised: int = 1
    last_raised_at: datetime | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None

    @property
    def is_open(self) -> bool:
        """Whether it is open: neither acknowledged nor resolved."""
        return self.state is AlertState.OPEN

    def to_json(self) -> dict[str, JsonValue]:
        """The alert as a JSON object, instants in ISO 8601 (`--json` output)."""
        return {
            "id": self.id,
            "task_id": self.task_id,
            "workflow": self.workflow,
            "key": self.key,
            "state": self.state.value,
            "reason": self.reason,
            "failure_count": self.failure_count,
            "times_raised": self.times_raised,
            "raised_at": self.raised_at.isoformat(),
            "last_raised_at": _iso(self.last_raised_at),
            "acknowledged_at": _iso(self.acknowledged_at),
            "acknowledged_by": self.acknowledged_by,
            "resolved_at": _iso(self.resolved_at),
            "resolved_by": self.resolved_by,
        }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def fail_reason(error: JsonValue) -> str:
    """The reason of an owner's failure into `error`: its error's `reason`, as text."""
    if isinstance(error, dict):
        return str(error.get("reason"))
    return str(error)


def on_decision(decision: Decision) -> Raised | None:
    """The alert a supervisor's decision or crash verdict raises: only `Escalate` raises one."""
    if isinstance(decision, Escalate):
        return Raised(reason=decision.reason, failure_count=decision.failure_count)
    return None


def on_fail(state: ProcessState, error: JsonValue, *, failure_count: int) -> Raised | None:
    """The alert an owner's failure raises: only a failure into `error` raises one.

    Args:
        state: The state the owner ends the task in.
        error: The error it stores; the alert's reason is `fail_reason(error)`.
        failure_count: The task's failure count, which the failure leaves as it is.
    """
    if state != ProcessState.ERROR:
        return None
    return Raised(reason=fail_reason(error), failure_count=failure_count)


def resolution(state: str, *, cancelled_by: str | None = None) -> str | None:
    """What resolves the alerts of a task that ends in `state`; None if that end resolves none.

    A task that ends in any state but `error` (`RESOLVING_STATES`) resolves
    them: `task processed`, `task compensated`, `task cancelled`, or `task
    cancelled by anna` when the operator whose cancel led to it is known.
    """
    if state not in RESOLVING_STATES:
        return None
    if state == ProcessState.CANCELLED and cancelled_by:
        return f"task cancelled by {cancelled_by}"
    return f"task {state}"
