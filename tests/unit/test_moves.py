"""The rules of a move that drains (`shepherd.core.moves`): its timeout, its lease, its report."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core.moves import InFlightStep, PartitionMove, check_move_timeout, draining
from shepherd.core.resources import Partition

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("timeout", [None, 0.001, 1, 30.5])
def test_a_timeout_is_positive_finite_seconds_or_none(timeout: float | None) -> None:
    assert check_move_timeout(timeout) is None


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [
        (0, "timeout must be above 0 seconds and finite, not 0"),
        (-2.5, "not -2.5"),
        (math.nan, "not nan"),
        (math.inf, "not inf"),
        (True, "timeout must be a number of seconds, not True"),
        ("5", "not '5'"),
    ],
)
def test_other_timeouts_are_refused_saying_why(timeout: object, problem: str) -> None:
    found = check_move_timeout(timeout)
    assert found is not None
    assert problem in found


def test_a_partition_drains_while_its_moves_lease_runs() -> None:
    assert draining(NOW + timedelta(seconds=1), NOW)
    assert not draining(NOW, NOW)  # a lease that has just passed holds nothing
    assert not draining(NOW - timedelta(seconds=1), NOW)
    assert not draining(None, NOW)


def test_a_moves_report_as_json() -> None:
    done = PartitionMove(
        partition=Partition(name="p1", resource="db2", entities=3),
        previous="db1",
        in_flight=(InFlightStep(task_id="t1", seq=2, agent="write", attempt=1),),
        now=True,
    )

    assert done.to_json() == {
        "partition": "p1",
        "resource": "db2",
        "previous": "db1",
        "entities": 3,
        "waited_for": 0,
        "in_flight": [{"task_id": "t1", "seq": 2, "agent": "write", "attempt": 1}],
        "now": True,
        "timed_out": False,
    }
