"""Stored operator alerts: which writes raise one, what it says, and the record an operator reads.

A task that moves into `error` needs an operator. The write that moves it
there (a supervisor's `Escalate`, a crash verdict that quarantines it, its
owner failing it into `error`) also stores an alert, in the same transaction,
so that the alert outlives the process that raised it. `Raised` is what such a
write stores: the same reason and failure count the alert sinks are sent
(`shepherd.alerts.Alert`). `StoredAlert` is the row as an operator lists it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.core.states import ProcessState
from shepherd.core.supervision import Escalate

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue
    from shepherd.core.supervision import Decision

__all__ = ["Raised", "StoredAlert", "fail_reason", "on_decision", "on_fail"]


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
        reason: Why, as the alert sinks were told.
        failure_count: Expirations and failures when it was raised.
        raised_at: When its task moved into `error` (store clock).
        acknowledged_at: When an operator acknowledged it; None while open.
        acknowledged_by: Who acknowledged it; None while open.
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

    @property
    def is_open(self) -> bool:
        """Whether no operator has acknowledged it yet."""
        return self.acknowledged_at is None

    def to_json(self) -> dict[str, JsonValue]:
        """The alert as a JSON object, instants in ISO 8601 (`--json` output)."""
        acknowledged_at = self.acknowledged_at
        return {
            "id": self.id,
            "task_id": self.task_id,
            "workflow": self.workflow,
            "key": self.key,
            "reason": self.reason,
            "failure_count": self.failure_count,
            "raised_at": self.raised_at.isoformat(),
            "acknowledged_at": None if acknowledged_at is None else acknowledged_at.isoformat(),
            "acknowledged_by": self.acknowledged_by,
        }


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
