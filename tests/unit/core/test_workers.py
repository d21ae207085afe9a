"""The worker registry's rule: alive until `ttl` seconds after the last beat; stopped wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core.workers import Worker, WorkerState, instance_of, liveness, takes_work

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TTL = 10.0


@pytest.mark.parametrize(
    ("silent_for", "expected"),
    [
        (0.0, WorkerState.ALIVE),
        (9.999, WorkerState.ALIVE),
        (10.0, WorkerState.DEAD),  # dead from beat_at + ttl on, as a lease expires
        (3600.0, WorkerState.DEAD),
    ],
)
def test_a_worker_is_dead_once_its_last_beat_is_ttl_old(
    silent_for: float, expected: WorkerState
) -> None:
    beat_at = NOW - timedelta(seconds=silent_for)
    assert liveness(beat_at=beat_at, stopped_at=None, now=NOW, ttl=TTL) is expected


@pytest.mark.parametrize("silent_for", [0.0, 60.0])
def test_a_stopped_worker_is_stopped_whatever_its_last_beat(silent_for: float) -> None:
    beat_at = NOW - timedelta(seconds=silent_for)
    state = liveness(beat_at=beat_at, stopped_at=beat_at, now=NOW, ttl=TTL)
    assert state is WorkerState.STOPPED


def test_a_beat_after_now_is_alive() -> None:
    # Another process's beat on a store clock a little ahead of ours.
    ahead = NOW + timedelta(seconds=1)
    assert liveness(beat_at=ahead, stopped_at=None, now=NOW, ttl=TTL) is WorkerState.ALIVE


def test_the_record_applies_the_rule() -> None:
    worker = Worker(
        instance="h:1:ab",
        host="h",
        pid=1,
        roles=("scheduler",),
        agents=(),
        started_at=NOW,
        beat_at=NOW,
    )
    assert worker.state(now=NOW, ttl=TTL) is WorkerState.ALIVE
    assert worker.state(now=NOW + timedelta(seconds=TTL), ttl=TTL) is WorkerState.DEAD
    assert str(WorkerState.DEAD) == "dead"


@pytest.mark.parametrize(
    ("owner", "instance"),
    [
        ("web-1:42:9f1c/s", "web-1:42:9f1c"),
        ("web-1:42:9f1c/a", "web-1:42:9f1c"),
        ("web-1:42:9f1c", "web-1:42:9f1c"),
    ],
)
def test_instance_of_strips_the_role_suffix(owner: str, instance: str) -> None:
    assert instance_of(owner) == instance


@pytest.mark.parametrize(
    ("failing", "since_beat", "expected"),
    [
        (False, 0.0, True),
        (False, 3600.0, True),  # no beat failed: a clock moved ahead is no outage
        (True, 0.0, True),
        (True, 9.999, True),  # the others still see it alive
        (True, 10.0, False),  # deemed dead from beat_at + ttl on: it stops
        (True, 3600.0, False),
    ],
)
def test_a_process_stops_taking_work_once_its_beats_failed_for_ttl(
    failing: bool, since_beat: float, expected: bool
) -> None:
    beat_at = 500.0
    assert takes_work(beat_at=beat_at, failing=failing, now=beat_at + since_beat, ttl=TTL) is (
        expected
    )
