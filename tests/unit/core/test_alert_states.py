"""What resolves a task's alerts, and a stored alert as JSON: pure decisions of `core.alerts`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shepherd.core.alerts import AlertState, StoredAlert, resolution
from shepherd.core.states import ProcessState

AT = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("state", "by", "expected"),
    [
        (ProcessState.PROCESSED, None, "task processed"),
        (ProcessState.COMPENSATED, None, "task compensated"),
        (ProcessState.CANCELLED, None, "task cancelled"),
        (ProcessState.CANCELLED, "anna", "task cancelled by anna"),
        ("processed", None, "task processed"),
        (ProcessState.ERROR, None, None),
        (ProcessState.COMPENSATING, "anna", None),
        (ProcessState.PENDING, None, None),
    ],
)
def test_only_a_good_end_resolves_and_says_by_what(
    state: str, by: str | None, expected: str | None
) -> None:
    assert resolution(state, cancelled_by=by) == expected


def test_a_stored_alert_as_json_says_its_state_count_and_resolution() -> None:
    alert = StoredAlert(
        id=3,
        task_id="t-1",
        workflow="orders.pay",
        key="A-1",
        reason="bug",
        failure_count=2,
        raised_at=AT,
        acknowledged_at=AT,
        acknowledged_by="anna",
        state=AlertState.RESOLVED,
        times_raised=2,
        last_raised_at=AT,
        resolved_at=AT,
        resolved_by="task processed",
    )

    assert not alert.is_open
    assert alert.to_json() == {
        "id": 3,
        "task_id": "t-1",
        "workflow": "orders.pay",
        "key": "A-1",
        "state": "resolved",
        "reason": "bug",
        "failure_count": 2,
        "times_raised": 2,
        "raised_at": "2030-01-01T12:00:00+00:00",
        "last_raised_at": "2030-01-01T12:00:00+00:00",
        "acknowledged_at": "2030-01-01T12:00:00+00:00",
        "acknowledged_by": "anna",
        "resolved_at": "2030-01-01T12:00:00+00:00",
        "resolved_by": "task processed",
    }
