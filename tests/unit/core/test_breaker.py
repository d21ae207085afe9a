"""The circuit breaker: each transition and edge, then random runs against a model."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from shepherd.core.breaker import (
    Breaker,
    BreakerPolicy,
    BreakerState,
    Call,
    Probe,
    Wait,
    allow,
    change_detail,
    record_failure,
    record_success,
    should_open,
    transition,
)

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
POLICY = BreakerPolicy(failure_threshold=3, cool_down=10.0, window=30.0)
RATIO = BreakerPolicy(failure_threshold=100, failure_ratio=0.5, window=30.0, min_calls=4)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def fail_times(b: Breaker, policy: BreakerPolicy, n: int, *, now: datetime = NOW) -> Breaker:
    for _ in range(n):
        b = record_failure(b, policy, now=now)
    return b


def opened(policy: BreakerPolicy = POLICY, *, now: datetime = NOW) -> Breaker:
    b = fail_times(Breaker(service="s"), policy, policy.failure_threshold, now=now)
    assert b.state is BreakerState.OPEN
    return b


def half_open(policy: BreakerPolicy = POLICY) -> Breaker:
    b, decision = allow(opened(policy), policy, now=at(policy.cool_down))
    assert decision == Probe()
    return b


# --- policy and record validation ---------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"failure_threshold": 0}, "failure_threshold"),
        ({"failure_threshold": 1.5}, "failure_threshold"),
        ({"failure_threshold": True}, "failure_threshold"),
        ({"failure_ratio": 0.0}, "failure_ratio"),
        ({"failure_ratio": 1.5}, "failure_ratio"),
        ({"failure_ratio": math.nan}, "failure_ratio"),
        ({"failure_ratio": True}, "failure_ratio"),
        ({"window": 0.0}, "window"),
        ({"window": math.inf}, "window"),
        ({"window": math.nan}, "window"),
        ({"min_calls": 0}, "min_calls"),
        ({"min_calls": 2.0}, "min_calls"),
        ({"cool_down": 0.0}, "cool_down"),
        ({"cool_down": -1.0}, "cool_down"),
        ({"cool_down": math.inf}, "cool_down"),
    ],
)
def test_invalid_policy_names_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        BreakerPolicy(**changes)


def test_policy_defaults() -> None:
    policy = BreakerPolicy()
    assert (policy.failure_threshold, policy.failure_ratio) == (5, None)
    assert (policy.window, policy.min_calls, policy.cool_down) == (30.0, 10, 10.0)
    assert BreakerPolicy(failure_ratio=1).failure_ratio == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"service": ""}, "service"),
        ({"state": "open"}, "state"),
        ({"consecutive_failures": -1}, "consecutive_failures"),
        ({"window_calls": -1}, "window_calls"),
        ({"window_calls": 1, "window_failures": 2}, "window_failures"),
        ({"version": -1}, "version"),
        ({"state": BreakerState.OPEN}, "opened_at"),
        ({"state": BreakerState.HALF_OPEN, "opened_at": NOW}, "probe_started_at"),
        ({"probe_started_at": NOW}, "probe_started_at"),
    ],
)
def test_invalid_breaker_names_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Breaker(**{"service": "s", **changes})


def test_new_breaker_is_closed_and_empty() -> None:
    b = Breaker(service="payments")
    assert b.state is BreakerState.CLOSED
    assert (b.consecutive_failures, b.window_calls, b.window_failures, b.version) == (0, 0, 0, 0)
    assert b.window_started_at is b.opened_at is b.probe_started_at is None


def test_state_values_are_stable_strings() -> None:
    assert [s.value for s in BreakerState] == ["closed", "open", "half_open"]


# --- closed ----------------------------------------------------------------------------


def test_closed_allows_a_call_without_change() -> None:
    b = Breaker(service="s")
    new, decision = allow(b, POLICY, now=NOW)
    assert decision == Call()
    assert new is b


def test_success_in_closed_counts_and_resets_consecutive() -> None:
    b = fail_times(Breaker(service="s"), POLICY, 2)
    assert (b.consecutive_failures, b.window_calls, b.window_failures, b.version) == (2, 2, 2, 2)
    b = record_success(b, POLICY, now=at(1))
    assert b.state is BreakerState.CLOSED
    assert (b.consecutive_failures, b.window_calls, b.window_failures, b.version) == (0, 3, 2, 3)
    assert b.window_started_at == NOW


def test_failures_below_threshold_keep_it_closed() -> None:
    b = fail_times(Breaker(service="s"), POLICY, 2)
    assert b.state is BreakerState.CLOSED
    assert b.opened_at is None


def test_threshold_of_consecutive_failures_opens() -> None:
    b = fail_times(Breaker(service="s"), POLICY, 2)
    new = record_failure(b, POLICY, now=at(5))
    assert new.state is BreakerState.OPEN
    assert new.opened_at == at(5)
    assert new.version == b.version + 1
    assert new.consecutive_failures == 3  # kept: it tells why the breaker opened
    assert transition(b, new) == (BreakerState.CLOSED, BreakerState.OPEN)


def test_a_success_between_failures_restarts_the_run() -> None:
    b = fail_times(Breaker(service="s"), POLICY, 2)
    b = record_success(b, POLICY, now=NOW)
    b = fail_times(b, POLICY, 2)
    assert b.state is BreakerState.CLOSED


def test_threshold_of_one_opens_on_the_first_failure() -> None:
    policy = BreakerPolicy(failure_threshold=1)
    assert record_failure(Breaker(service="s"), policy, now=NOW).state is BreakerState.OPEN


# --- ratio and window ------------------------------------------------------------------


def test_ratio_needs_min_calls() -> None:
    b = Breaker(service="s")
    b = record_success(b, RATIO, now=NOW)
    b = fail_times(b, RATIO, 2)  # 2 of 3 failed: above the ratio, but under min_calls
    assert b.state is BreakerState.CLOSED
    b = record_success(b, RATIO, now=NOW)  # 2 of 4: the ratio is checked on failures only
    assert b.state is BreakerState.CLOSED
    b = record_failure(b, RATIO, now=NOW)  # 3 of 5
    assert b.state is BreakerState.OPEN


def test_ratio_exactly_reached_opens() -> None:
    policy = BreakerPolicy(failure_threshold=100, failure_ratio=0.3, min_calls=10)
    b = Breaker(service="s")
    for _ in range(7):
        b = record_success(b, policy, now=NOW)
    b = fail_times(b, policy, 2)
    assert b.state is BreakerState.CLOSED
    b = record_failure(b, policy, now=NOW)  # 3 of 10 == 0.3
    assert b.state is BreakerState.OPEN


def test_ratio_below_keeps_it_closed() -> None:
    b = Breaker(service="s")
    for _ in range(3):
        b = record_success(b, RATIO, now=NOW)
    b = fail_times(b, RATIO, 2)
    b = record_success(b, RATIO, now=NOW)
    b = record_success(b, RATIO, now=NOW)
    b = record_failure(b, RATIO, now=NOW)  # 3 of 8 < 0.5
    assert b.state is BreakerState.CLOSED


def test_without_ratio_only_the_threshold_opens() -> None:
    policy = BreakerPolicy(failure_threshold=3, min_calls=1)
    b = Breaker(service="s")
    for _ in range(10):
        b = record_failure(b, policy, now=NOW)
        b = record_success(b, policy, now=NOW)
    assert b.state is BreakerState.CLOSED
    assert b.window_failures == 10


def test_window_rolls_at_its_length() -> None:
    b = record_failure(Breaker(service="s"), RATIO, now=NOW)
    assert (b.window_started_at, b.window_calls, b.window_failures) == (NOW, 1, 1)
    b = record_failure(b, RATIO, now=at(29.999))
    assert (b.window_started_at, b.window_calls, b.window_failures) == (NOW, 2, 2)
    b = record_success(b, RATIO, now=at(30))
    assert (b.window_started_at, b.window_calls, b.window_failures) == (at(30), 1, 0)


def test_window_roll_forgets_old_failures_for_the_ratio() -> None:
    b = Breaker(service="s")
    b = fail_times(b, RATIO, 3)  # 3 of 3, under min_calls
    b = record_success(b, RATIO, now=at(31))  # new window: 0 of 1
    b = record_failure(b, RATIO, now=at(31))
    b = record_success(b, RATIO, now=at(31))
    assert (b.window_calls, b.window_failures) == (3, 1)
    assert b.state is BreakerState.CLOSED


def test_window_roll_does_not_reset_consecutive_failures() -> None:
    b = fail_times(Breaker(service="s"), POLICY, 2)
    b = record_failure(b, POLICY, now=at(100))
    assert b.state is BreakerState.OPEN
    assert (b.window_calls, b.window_failures) == (1, 1)


def test_should_open() -> None:
    assert should_open(RATIO, consecutive_failures=100, window_calls=100, window_failures=100)
    assert not should_open(RATIO, consecutive_failures=3, window_calls=3, window_failures=3)
    assert should_open(RATIO, consecutive_failures=1, window_calls=4, window_failures=2)
    assert not should_open(POLICY, consecutive_failures=2, window_calls=4, window_failures=4)


# --- open ------------------------------------------------------------------------------


def test_open_waits_until_the_cool_down_ends() -> None:
    b = opened()
    new, decision = allow(b, POLICY, now=at(9.999999))
    assert decision == Wait(until=at(10))
    assert new is b


def test_open_allows_a_probe_at_the_cool_down_boundary() -> None:
    b = opened()
    new, decision = allow(b, POLICY, now=at(10))
    assert decision == Probe()
    assert new.state is BreakerState.HALF_OPEN
    assert new.probe_started_at == at(10)
    assert new.opened_at == NOW
    assert new.version == b.version + 1
    assert transition(b, new) == (BreakerState.OPEN, BreakerState.HALF_OPEN)


def test_open_allows_a_probe_long_after_the_cool_down() -> None:
    new, decision = allow(opened(), POLICY, now=at(1000))
    assert decision == Probe()
    assert new.probe_started_at == at(1000)


@pytest.mark.parametrize("record", [record_success, record_failure])
def test_late_reports_while_open_are_ignored(record: Any) -> None:
    b = opened()
    assert record(b, POLICY, now=at(1)) is b


# --- half-open -------------------------------------------------------------------------


def test_half_open_waits_for_the_probe_in_flight() -> None:
    b = half_open()
    new, decision = allow(b, POLICY, now=at(19.999))
    assert decision == Wait(until=at(20))
    assert new is b


def test_stale_probe_is_given_up_after_the_cool_down() -> None:
    b = half_open()
    new, decision = allow(b, POLICY, now=at(20))
    assert decision == Probe()
    assert new.state is BreakerState.HALF_OPEN
    assert new.probe_started_at == at(20)
    assert new.version == b.version + 1
    assert transition(b, new) is None


def test_successful_probe_closes_and_resets() -> None:
    b = half_open()
    new = record_success(b, POLICY, now=at(11))
    assert new == Breaker(service="s", version=b.version + 1)
    assert transition(b, new) == (BreakerState.HALF_OPEN, BreakerState.CLOSED)
    # a fresh start: the threshold counts from zero again
    assert fail_times(new, POLICY, 2, now=at(12)).state is BreakerState.CLOSED


def test_failed_probe_reopens() -> None:
    b = half_open()
    new = record_failure(b, POLICY, now=at(12))
    assert new.state is BreakerState.OPEN
    assert new.opened_at == at(12)
    assert new.probe_started_at is None
    assert new.version == b.version + 1
    assert transition(b, new) == (BreakerState.HALF_OPEN, BreakerState.OPEN)
    _, decision = allow(new, POLICY, now=at(21))
    assert decision == Wait(until=at(22))


def test_transition_rejects_different_services() -> None:
    with pytest.raises(ValueError, match="service"):
        transition(Breaker(service="a"), Breaker(service="b"))


def test_transition_none_when_state_is_the_same() -> None:
    b = Breaker(service="s")
    assert transition(b, record_success(b, POLICY, now=NOW)) is None


def test_breaker_round_trips_through_plain_fields() -> None:
    b = half_open()
    fields = {name: getattr(b, name) for name in Breaker.__dataclass_fields__}
    fields["state"] = BreakerState(str(fields["state"]))
    assert Breaker(**fields) == b
    assert replace(b) == b


# --- random runs -----------------------------------------------------------------------

START = datetime(2030, 1, 1, tzinfo=UTC)


@st.composite
def policies(draw: st.DrawFn) -> BreakerPolicy:
    return BreakerPolicy(
        failure_threshold=draw(st.integers(1, 5)),
        failure_ratio=draw(st.none() | st.sampled_from([0.25, 0.5, 0.75, 1.0])),
        window=draw(st.sampled_from([1.0, 5.0, 30.0])),
        min_calls=draw(st.integers(1, 6)),
        cool_down=draw(st.sampled_from([0.5, 2.0, 10.0])),
    )


class BreakerMachine(RuleBasedStateMachine):
    """Random calls, reports and time advances, checked against an independent model.

    The model keeps its own counts (in a row, and per fixed window) to know when the
    breaker was entitled to open.
    """

    def __init__(self) -> None:
        super().__init__()
        self.policy = BreakerPolicy()
        self.now = START
        self.b = Breaker(service="svc")
        self.consecutive = 0
        self.window_start: datetime | None = None
        self.calls = 0
        self.failures = 0
        self.probe_at: datetime | None = None  # the model's probe in flight

    @initialize(policy=policies())
    def setup(self, policy: BreakerPolicy) -> None:
        self.policy = policy

    def _step(self, new: Breaker) -> None:
        old = self.b
        changed = replace(new, version=old.version) != old
        if changed:
            assert new.version == old.version + 1
        else:
            assert new.version == old.version
            assert new == old
        self.b = new

    def _count(self, *, failed: bool) -> None:
        window = timedelta(seconds=self.policy.window)
        if self.window_start is None or self.now - self.window_start >= window:
            self.window_start, self.calls, self.failures = self.now, 0, 0
        self.calls += 1
        self.failures += failed
        self.consecutive = self.consecutive + 1 if failed else 0

    def _reset(self) -> None:
        self.consecutive, self.window_start, self.calls, self.failures = 0, None, 0, 0

    @rule(seconds=st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]))
    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def ask(self) -> None:
        old = self.b
        new, decision = allow(old, self.policy, now=self.now)
        self._step(new)
        cool_down = timedelta(seconds=self.policy.cool_down)
        if isinstance(decision, Call):
            assert old.state is BreakerState.CLOSED
            assert new is old
        elif isinstance(decision, Wait):
            assert old.state is not BreakerState.CLOSED
            assert decision.until > self.now
            assert new is old
            if old.state is BreakerState.OPEN:
                assert old.opened_at is not None
                assert decision.until == old.opened_at + cool_down
        else:
            assert isinstance(decision, Probe)
            assert old.state is not BreakerState.CLOSED
            if old.state is BreakerState.OPEN:
                assert old.opened_at is not None
                assert self.now >= old.opened_at + cool_down
            # at most one probe in flight within the cool-down
            if self.probe_at is not None:
                assert self.now - self.probe_at >= cool_down
            self.probe_at = self.now
            assert new.state is BreakerState.HALF_OPEN
            assert new.probe_started_at == self.now

    @rule()
    def succeed(self) -> None:
        old = self.b
        new = record_success(old, self.policy, now=self.now)
        self._step(new)
        if old.state is BreakerState.HALF_OPEN:
            assert new.state is BreakerState.CLOSED
            assert transition(old, new) == (BreakerState.HALF_OPEN, BreakerState.CLOSED)
            self.probe_at = None
            self._reset()
        elif old.state is BreakerState.OPEN:
            assert new is old
        else:
            self._count(failed=False)
            assert new.state is BreakerState.CLOSED

    @rule()
    def fail(self) -> None:
        old = self.b
        new = record_failure(old, self.policy, now=self.now)
        self._step(new)
        if old.state is BreakerState.HALF_OPEN:
            assert new.state is BreakerState.OPEN
            assert new.opened_at == self.now
            self.probe_at = None
        elif old.state is BreakerState.OPEN:
            assert new is old
        else:
            self._count(failed=True)
            ratio = self.policy.failure_ratio
            entitled = self.consecutive >= self.policy.failure_threshold or (
                ratio is not None
                and self.calls >= self.policy.min_calls
                and self.failures / self.calls >= ratio
            )
            assert (new.state is BreakerState.OPEN) == entitled
            if entitled:
                assert new.opened_at == self.now
                assert transition(old, new) == (BreakerState.CLOSED, BreakerState.OPEN)

    @invariant()
    def record_matches_model(self) -> None:
        b = self.b
        if b.state is BreakerState.CLOSED:
            assert b.consecutive_failures == self.consecutive
            assert (b.window_started_at, b.window_calls, b.window_failures) == (
                self.window_start,
                self.calls,
                self.failures,
            )
            assert b.opened_at is None
        assert (b.state is BreakerState.HALF_OPEN) == (self.probe_at is not None)
        assert b.probe_started_at == self.probe_at


BreakerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestBreakerMachine = BreakerMachine.TestCase


# -- change_detail: what a recorded change says ------------------------------------
def test_change_detail_names_why_the_breaker_opened() -> None:
    closed = fail_times(Breaker(service="s"), POLICY, 2)
    opened = record_failure(closed, POLICY, now=NOW)

    assert change_detail(closed, opened, POLICY) == {
        "reason": "consecutive_failures",
        "consecutive_failures": 3,
        "window_calls": 3,
        "window_failures": 3,
        "cool_down": 10.0,
    }


def test_change_detail_names_the_ratio() -> None:
    b = Breaker(service="s")
    for _ in range(2):
        b = record_success(b, RATIO, now=NOW)
    b = record_failure(b, RATIO, now=NOW)
    opened = record_failure(b, RATIO, now=NOW)

    detail = change_detail(b, opened, RATIO)

    assert detail is not None
    assert (detail["reason"], detail["window_calls"], detail["window_failures"]) == (
        "failure_ratio",
        4,
        2,
    )


def test_change_detail_of_a_probe_and_its_outcomes() -> None:
    opened = fail_times(Breaker(service="s"), POLICY, 3)
    probing, _ = allow(opened, POLICY, now=at(10))
    reprobing, _ = allow(probing, POLICY, now=at(20))

    assert change_detail(opened, probing, POLICY) == {
        "reason": "cool_down",
        "consecutive_failures": 3,
        "window_calls": 3,
        "window_failures": 3,
        "cool_down": 10.0,
    }
    assert change_detail(probing, reprobing, POLICY)["reason"] == "probe_unreported"  # type: ignore[index]
    failed = record_failure(probing, POLICY, now=at(11))
    assert change_detail(probing, failed, POLICY)["reason"] == "probe_failed"  # type: ignore[index]
    closed = record_success(probing, POLICY, now=at(11))
    # Closing resets the counters: the detail keeps the ones that opened it.
    assert change_detail(probing, closed, POLICY) == {
        "reason": "probe_succeeded",
        "consecutive_failures": 3,
        "window_calls": 3,
        "window_failures": 3,
        "cool_down": 10.0,
    }


def test_change_detail_is_none_without_a_change_of_state() -> None:
    b = Breaker(service="s")
    counted = record_failure(b, POLICY, now=NOW)
    opened = fail_times(b, POLICY, 3)
    probing, _ = allow(opened, POLICY, now=at(10))
    waiting, _ = allow(probing, POLICY, now=at(11))

    assert change_detail(b, counted, POLICY) is None
    assert change_detail(probing, waiting, POLICY) is None
