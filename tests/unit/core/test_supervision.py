from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.states import ProcessState
from shepherd.core.supervision import (
    BackoffPolicy,
    Compensate,
    Escalate,
    Expiry,
    Reset,
    SupervisionPolicy,
    is_expired,
    is_silent,
    on_claim_expired,
    on_expired,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from shepherd.core.records import Task

    TaskFactory = Callable[..., Task]

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
BEFORE = NOW - timedelta(microseconds=1)

NO_JITTER = BackoffPolicy(initial=1.0, multiplier=2.0, max_delay=5.0, jitter=0.0)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"initial": -1.0}, "initial"),
        ({"initial": math.nan}, "initial"),
        ({"multiplier": 0.9}, "multiplier"),
        ({"multiplier": math.inf}, "multiplier"),
        ({"initial": 2.0, "max_delay": 1.0}, "max_delay"),
        ({"max_delay": math.inf}, "max_delay"),
        ({"jitter": -0.1}, "jitter"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": math.nan}, "jitter"),
    ],
)
def test_invalid_backoff_names_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        BackoffPolicy(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_failures": 0}, "max_failures"),
        ({"max_failures": 2.0}, "max_failures"),
        ({"max_failures": False}, "max_failures"),
        ({"on_exhausted": "retry"}, "on_exhausted"),
    ],
)
def test_invalid_supervision_policy_names_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SupervisionPolicy(**changes)  # type: ignore[arg-type]


def test_default_policy() -> None:
    policy = SupervisionPolicy()
    assert policy.max_failures == 3
    assert policy.on_exhausted == "error"
    assert policy.backoff == BackoffPolicy()


@pytest.mark.parametrize(("failures", "expected"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0)])
def test_backoff_delay_is_capped_exponential(failures: int, expected: float) -> None:
    assert NO_JITTER.delay(failures, random.Random(0)) == expected


@settings(max_examples=150)
@given(failures=st.integers(1, 10_000), jitter=st.floats(0, 1), seed=st.integers(0, 2**32))
def test_backoff_jitter_stays_within_its_fraction(failures: int, jitter: float, seed: int) -> None:
    policy = BackoffPolicy(initial=0.5, multiplier=3.0, max_delay=60.0, jitter=jitter)
    base = BackoffPolicy(initial=0.5, multiplier=3.0, max_delay=60.0, jitter=0.0)
    expected = base.delay(failures, random.Random(seed))
    delay = policy.delay(failures, random.Random(seed))
    assert max(0.0, expected * (1 - jitter)) - 1e-9 <= delay <= expected * (1 + jitter) + 1e-9


def test_first_expiry_resets_to_pending_after_the_backoff(task_factory: TaskFactory) -> None:
    task = task_factory(process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW)
    policy = SupervisionPolicy(max_failures=3, backoff=NO_JITTER)
    decision = on_expired(task, policy, now=NOW, rng=random.Random(0))
    assert isinstance(decision, Reset)
    assert decision.failure_count == 1
    assert decision.process_state is ProcessState.PENDING
    assert decision.not_before == NOW + timedelta(seconds=1)
    assert "expired 1 time (max_failures=3)" in decision.reason


def test_the_default_backoff_reclaims_at_once(task_factory: TaskFactory) -> None:
    task = task_factory(process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW)
    decision = on_expired(task, SupervisionPolicy(), now=NOW, rng=random.Random(0))
    assert isinstance(decision, Reset)
    assert decision.not_before == NOW


def test_the_backoff_grows_with_the_failures(task_factory: TaskFactory) -> None:
    task = task_factory(
        process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW, failure_count=2
    )
    policy = SupervisionPolicy(max_failures=5, backoff=NO_JITTER)
    decision = on_expired(task, policy, now=NOW, rng=random.Random(0))
    assert isinstance(decision, Reset)
    assert decision.failure_count == 3
    assert decision.not_before == NOW + timedelta(seconds=4)
    assert "expired 3 times (max_failures=5)" in decision.reason


def test_at_the_threshold_the_task_is_escalated(task_factory: TaskFactory) -> None:
    task = task_factory(
        process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW, failure_count=2
    )
    decision = on_expired(task, SupervisionPolicy(max_failures=3), now=NOW, rng=random.Random(0))
    assert decision == Escalate(
        failure_count=3, reason="complete_by expired 3 times (max_failures=3)"
    )


def test_at_the_threshold_the_task_may_be_compensated(task_factory: TaskFactory) -> None:
    task = task_factory(
        process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW, failure_count=2
    )
    policy = SupervisionPolicy(max_failures=3, on_exhausted="compensate")
    decision = on_expired(task, policy, now=NOW, rng=random.Random(0))
    assert isinstance(decision, Compensate)
    assert decision.failure_count == 0
    assert "expired 3 times (max_failures=3)" in decision.reason


def test_a_single_failure_threshold_acts_at_once(task_factory: TaskFactory) -> None:
    task = task_factory(process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW)
    decision = on_expired(task, SupervisionPolicy(max_failures=1), now=NOW, rng=random.Random(0))
    assert decision == Escalate(
        failure_count=1, reason="complete_by expired 1 time (max_failures=1)"
    )


def test_over_the_threshold_still_exhausts(task_factory: TaskFactory) -> None:
    task = task_factory(
        process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW, failure_count=7
    )
    decision = on_expired(task, SupervisionPolicy(max_failures=3), now=NOW, rng=random.Random(0))
    assert isinstance(decision, Escalate)


def test_an_expired_compensation_is_reset_and_stays_compensating(
    task_factory: TaskFactory,
) -> None:
    task = task_factory(
        process_state=ProcessState.COMPENSATING, locked_by="s1", complete_by=NOW, failure_count=1
    )
    policy = SupervisionPolicy(max_failures=3, on_exhausted="compensate", backoff=NO_JITTER)
    decision = on_expired(task, policy, now=NOW, rng=random.Random(0))
    assert isinstance(decision, Reset)
    assert decision.process_state is ProcessState.COMPENSATING
    assert decision.failure_count == 2


@pytest.mark.parametrize("on_exhausted", ["error", "compensate"])
def test_compensation_that_cannot_finish_is_escalated(
    task_factory: TaskFactory, on_exhausted: str
) -> None:
    task = task_factory(
        process_state=ProcessState.COMPENSATING, locked_by="s1", complete_by=NOW, failure_count=2
    )
    policy = SupervisionPolicy(max_failures=3, on_exhausted=on_exhausted)  # type: ignore[arg-type]
    decision = on_expired(task, policy, now=NOW, rng=random.Random(0))
    assert decision == Escalate(
        failure_count=3,
        reason="compensation could not finish: complete_by expired 3 times (max_failures=3)",
    )


@pytest.mark.parametrize(
    ("changes", "expired"),
    [
        (
            {"process_state": ProcessState.PROCESSING, "locked_by": "s1", "complete_by": BEFORE},
            True,
        ),
        (
            {"process_state": ProcessState.COMPENSATING, "locked_by": "s1", "complete_by": BEFORE},
            True,
        ),
        ({"process_state": ProcessState.PROCESSING, "locked_by": "s1", "complete_by": NOW}, False),
        (
            {
                "process_state": ProcessState.PROCESSING,
                "locked_by": "s1",
                "complete_by": NOW + timedelta(seconds=1),
            },
            False,
        ),
        ({"process_state": ProcessState.PROCESSING, "locked_by": "s1", "complete_by": None}, False),
        (
            {"process_state": ProcessState.COMPENSATING, "locked_by": None, "complete_by": NOW},
            False,
        ),
        ({"process_state": ProcessState.PENDING, "locked_by": None, "complete_by": NOW}, False),
        ({"process_state": ProcessState.ERROR, "locked_by": "s1", "complete_by": NOW}, False),
    ],
)
def test_is_expired(task_factory: TaskFactory, changes: dict[str, object], expired: bool) -> None:
    assert is_expired(task_factory(**changes), now=NOW) is expired


def test_decisions_do_not_read_the_clock(task_factory: TaskFactory) -> None:
    later = datetime(2031, 6, 1, tzinfo=NOW.tzinfo)
    task = task_factory(process_state=ProcessState.PROCESSING, locked_by="s1", complete_by=NOW)
    decision = on_expired(
        task, SupervisionPolicy(backoff=NO_JITTER), now=later, rng=random.Random(0)
    )
    assert isinstance(decision, Reset)
    assert decision.not_before == later + timedelta(seconds=1)


# -- what an expired claim costs its task --------------------------------------
def expired_task(task_factory: TaskFactory, **changes: object) -> Task:
    return task_factory(
        process_state=ProcessState.PROCESSING,
        locked_by="h:1:aa/s",
        complete_by=NOW - timedelta(seconds=1),
        **changes,
    )


@pytest.mark.parametrize(
    "expiry",
    [
        Expiry(silent=True, probation=True, outage=True),
        # A step still inside its own window (a suspect's starts when it is taken,
        # a moment before its claim is carried along): its own deadline decides.
        Expiry(running=True),
        Expiry(running=True, recovery=True),
    ],
)
def test_a_claim_held_by_a_silent_process_or_a_running_step_waits(
    task_factory: TaskFactory, expiry: Expiry
) -> None:
    task = expired_task(task_factory)
    assert (
        on_claim_expired(task, SupervisionPolicy(), expiry, now=NOW, rng=random.Random(1)) is None
    )


@pytest.mark.parametrize(
    ("expiry", "why"),
    [
        (Expiry(probation=True), "waited in line to run apart"),
        (Expiry(recovery=True), "waited for an agent as crashed or frozen workers were recovered"),
        (Expiry(outage=True), "while the store was unreachable"),
    ],
)
def test_a_claim_that_expired_through_a_fault_is_reset_without_a_failure(
    task_factory: TaskFactory, expiry: Expiry, why: str
) -> None:
    task = expired_task(task_factory, failure_count=0)
    decision = on_claim_expired(
        task, SupervisionPolicy(max_failures=1), expiry, now=NOW, rng=random.Random(1)
    )
    assert isinstance(decision, Reset)
    assert decision.failure_count == 0
    assert decision.not_before == NOW
    assert why in decision.reason
    assert "not counted as a failure" in decision.reason


def test_a_claim_that_expired_on_its_own_is_charged(task_factory: TaskFactory) -> None:
    task = expired_task(task_factory, failure_count=0)
    decision = on_claim_expired(
        task, SupervisionPolicy(max_failures=1), Expiry(), now=NOW, rng=random.Random(1)
    )
    assert isinstance(decision, Escalate)
    assert decision.failure_count == 1


def test_a_process_is_silent_once_it_missed_one_and_a_half_beats() -> None:
    beat = NOW - timedelta(seconds=1.5)
    assert not is_silent(beat, now=NOW, beat=1.0)
    assert is_silent(beat, now=NOW + timedelta(milliseconds=1), beat=1.0)
    assert not is_silent(beat, now=NOW + timedelta(seconds=0.4), beat=1.0, beats=2.0)
    assert is_silent(beat, now=NOW + timedelta(seconds=0.6), beat=1.0, beats=2.0)
