"""The rules of delays and deadlines: which values are taken, and what a passed deadline does."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shepherd.core.events import EventKind
from shepherd.core.states import ProcessState
from shepherd.core.timing import (
    DEADLINE_PASSED,
    MAX_SECONDS,
    checked_deadline,
    checked_delay,
    checked_not_before,
    is_overdue,
    on_deadline,
)
from support.records import task_record

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_delay_may_be_zero_and_a_deadline_may_not() -> None:
    assert checked_delay(0) == 0.0
    assert checked_delay(2) == 2.0
    assert checked_delay(MAX_SECONDS) == MAX_SECONDS
    assert checked_deadline(0.25) == 0.25
    with pytest.raises(ValueError, match="deadline must be > 0 seconds, not 0"):
        checked_deadline(0)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (-0.5, ">= 0 seconds, not -0.5"),
        (math.nan, "finite number of seconds, not nan"),
        (math.inf, "finite number of seconds, not inf"),
        (MAX_SECONDS * 1.001, "at most"),
        (10**400, "at most"),
        (True, "a number of seconds, not bool"),
        (None, "a number of seconds, not NoneType"),
    ],
)
def test_a_delay_that_is_not_a_sane_number_of_seconds_is_refused(value: object, says: str) -> None:
    with pytest.raises(ValueError, match=f"^delay must be .*{re.escape(says)}"):
        checked_delay(value)


def test_not_before_must_be_aware_and_in_range_and_comes_back_in_utc() -> None:
    paris = datetime(2030, 6, 1, 14, tzinfo=timezone(timedelta(hours=2)))
    assert checked_not_before(paris) == datetime(2030, 6, 1, 12, tzinfo=UTC)
    assert checked_not_before(datetime(1990, 1, 1, tzinfo=UTC)).year == 1990  # past: at once
    with pytest.raises(ValueError, match="aware datetime"):
        checked_not_before(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="out of range in UTC"):
        checked_not_before(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))))
    with pytest.raises(ValueError, match="before 9000"):
        checked_not_before(datetime(9500, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="a datetime, not str"):
        checked_not_before("2030-01-01T00:00Z")


@pytest.mark.parametrize(
    ("state", "overdue"),
    [
        (ProcessState.PENDING, True),
        (ProcessState.PROCESSING, True),
        (ProcessState.COMPENSATING, False),
        (ProcessState.ERROR, False),
        (ProcessState.PROCESSED, False),
        (ProcessState.CANCELLED, False),
    ],
)
def test_a_deadline_cancels_only_a_task_pending_or_processing(
    state: ProcessState, overdue: bool
) -> None:
    task = task_record(process_state=state, deadline=NOW)
    assert is_overdue(task, now=NOW) is overdue
    assert not is_overdue(task, now=NOW - timedelta(microseconds=1))
    assert not is_overdue(task_record(process_state=state), now=NOW)


def test_a_passed_deadline_is_a_cancel_with_its_reason() -> None:
    effect = on_deadline(NOW)
    assert effect.process_state is ProcessState.COMPENSATING
    assert effect.event is EventKind.CANCEL_REQUESTED
    assert effect.error == {"reason": DEADLINE_PASSED, "deadline": "2030-01-01T00:00:00+00:00"}
    assert effect.detail == effect.error
