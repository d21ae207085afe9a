"""One handling of a request: each decision, each end, then random lives against a model."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from shepherd.core.handling import (
    SUPERSEDED,
    Failed,
    GiveUp,
    Handling,
    Next,
    Phase,
    ReplyError,
    ReplyResult,
    Retry,
    Superseded,
    TimedOut,
    begin,
)
from shepherd.core.retry import RetryPolicy

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)
POLICY = RetryPolicy(max_attempts=3, initial_delay=0.1, max_delay=1.0, jitter=False)
#: (resource, service): every combination of gates.
GATES = [(None, None), ("db", None), (None, "api"), ("db", "api")]


def handling(
    *, resource: str | None = None, service: str | None = None, policy: RetryPolicy = POLICY
) -> Handling:
    h = begin(
        complete_by=LATER, now=NOW, retry=None, policy=policy, resource=resource, service=service
    )
    assert isinstance(h, Handling)
    return h


def to_try(h: Handling) -> None:
    """Walk `h` through its gates to a try."""
    step: Next = h.start()
    while step is not Phase.TRY:
        if step is Phase.SLOT:
            step = h.slot_taken()
        elif step is Phase.BREAKER:
            step = h.breaker_passed()
        elif step is Phase.RATE:
            step = h.token_taken()
        else:
            raise AssertionError(f"unexpected {step!r} before a try")


def fail(
    h: Handling,
    kind: Any,
    *,
    error: BaseException | None = None,
    now: datetime = NOW,
    retry_after: float | None = None,
) -> Next:
    """Fail the try in flight; a transient failure's report to the breaker is made at once."""
    step = h.failed(
        error or RuntimeError(kind),
        kind,
        retry_after=retry_after,
        now=now,
        complete_by=LATER,
        rng=random.Random(0),
    )
    if step is Phase.REPORT:
        step = h.reported(now=now, complete_by=LATER, rng=random.Random(0))
    return step


# --- beginning ---------------------------------------------------------------------


@pytest.mark.parametrize("complete_by", [NOW, NOW - timedelta(microseconds=1)])
def test_a_request_past_its_complete_by_is_not_handled(complete_by: datetime) -> None:
    decided = begin(
        complete_by=complete_by,
        now=NOW,
        retry=None,
        policy=POLICY,
        resource="db",
        service="api",
    )

    assert decided is None


@pytest.mark.parametrize("retry", [{"max_attempts": 0}, {"colour": "red"}, "often", 3])
def test_an_unreadable_retry_policy_is_replied_as_an_error_at_once(retry: Any) -> None:
    decided = begin(
        complete_by=LATER, now=NOW, retry=retry, policy=POLICY, resource="db", service="api"
    )

    assert isinstance(decided, ReplyError)
    assert isinstance(decided.error, ValueError)
    assert (decided.bug, decided.tries, decided.answered) == (False, 0, False)


def test_the_request_s_retry_policy_replaces_the_agent_s() -> None:
    own = RetryPolicy(max_attempts=1)
    decided = begin(
        complete_by=LATER,
        now=NOW,
        retry=own.to_json(),
        policy=POLICY,
        resource=None,
        service=None,
    )

    assert isinstance(decided, Handling)
    assert decided.policy == own
    assert handling().policy == POLICY


@pytest.mark.parametrize(
    ("resource", "service", "phases"),
    [
        (None, None, []),
        ("db", None, [Phase.SLOT, Phase.RATE]),
        (None, "api", [Phase.BREAKER]),
        ("db", "api", [Phase.SLOT, Phase.BREAKER, Phase.RATE]),
    ],
)
def test_a_handling_takes_a_slot_once_then_passes_breaker_and_rate_before_each_try(
    resource: str | None, service: str | None, phases: list[Phase]
) -> None:
    h = handling(resource=resource, service=service)
    seen = []
    step: Next = h.start()
    while step is not Phase.TRY:
        seen.append(step)
        assert h.phase is step
        step = {
            Phase.SLOT: h.slot_taken,
            Phase.BREAKER: h.breaker_passed,
            Phase.RATE: h.token_taken,
        }[step]()
    assert seen == phases
    assert (h.phase, h.tries, h.retries) == (Phase.TRY, 1, 0)

    retry = fail(h, "transient")
    assert isinstance(retry, Retry)
    assert h.phase is Phase.BACKOFF
    again = []
    step = h.slept()
    while step is not Phase.TRY:
        again.append(step)
        step = {Phase.BREAKER: h.breaker_passed, Phase.RATE: h.token_taken}[step]()
    assert again == [p for p in phases if p is not Phase.SLOT]
    assert (h.tries, h.retries) == (2, 1)


# --- a try's outcome ---------------------------------------------------------------


@pytest.mark.parametrize(("resource", "service"), GATES)
def test_a_result_is_replied_and_the_breaker_told_the_service_answered(
    resource: str | None, service: str | None
) -> None:
    h = handling(resource=resource, service=service)
    to_try(h)

    assert h.succeeded() == ReplyResult(answered=service is not None)


def test_a_result_after_failed_tries_is_replied() -> None:
    h = handling(service="api")
    to_try(h)
    fail(h, "bug")
    h.slept()
    h.breaker_passed()

    assert h.succeeded() == ReplyResult(answered=True)
    assert (h.tries, h.retries) == (2, 1)


@pytest.mark.parametrize(("resource", "service"), GATES)
def test_a_permanent_failure_is_replied_at_once_as_an_answer_of_the_service(
    resource: str | None, service: str | None
) -> None:
    h = handling(resource=resource, service=service)
    to_try(h)
    error = ValueError("no such card")

    decided = h.failed(
        error, "permanent", retry_after=None, now=NOW, complete_by=LATER, rng=random.Random()
    )

    assert decided == ReplyError(error=error, bug=False, tries=1, answered=service is not None)
    assert h.retries == 0


def test_a_transient_failure_is_told_to_the_breaker_before_the_retry_is_decided() -> None:
    h = handling(service="api")
    to_try(h)
    rng = random.Random(1)

    error = TimeoutError()
    reported = h.failed(error, "transient", retry_after=0.05, now=NOW, complete_by=LATER, rng=rng)
    assert reported is Phase.REPORT
    assert (h.phase, h.retries) == (Phase.REPORT, 0)
    assert h.last == Failed(error, "transient", 0.05)

    decided = h.reported(now=NOW, complete_by=LATER, rng=rng)
    assert decided == Retry(0.1)
    assert (h.phase, h.retries) == (Phase.BACKOFF, 1)


@pytest.mark.parametrize(("kind", "service"), [("transient", None), ("bug", None), ("bug", "api")])
def test_a_failure_the_breaker_is_not_told_of_is_retried_at_once(
    kind: Any, service: str | None
) -> None:
    h = handling(service=service)
    to_try(h)

    decided = h.failed(
        RuntimeError(), kind, retry_after=None, now=NOW, complete_by=LATER, rng=random.Random()
    )

    assert decided == Retry(0.1)


def test_the_delays_follow_the_retry_policy_with_the_rng_given() -> None:
    policy = RetryPolicy(max_attempts=4, initial_delay=0.5, max_delay=10.0, jitter=True)
    h = handling(policy=policy)
    delays = []
    for _ in range(3):
        to_try(h) if h.tries == 0 else h.slept()
        decided = h.failed(
            RuntimeError(),
            "transient",
            retry_after=None,
            now=NOW,
            complete_by=LATER,
            rng=random.Random(7),
        )
        assert isinstance(decided, Retry)
        delays.append(decided.delay)
    expected = [random.Random(7).uniform(0.0, 0.5 * 2**n) for n in range(3)]
    assert delays == expected


def test_a_retry_waits_at_least_what_the_service_asked() -> None:
    h = handling()
    to_try(h)

    assert fail(h, "transient", retry_after=2.5) == Retry(2.5)


def test_a_retry_after_shorter_than_the_backoff_changes_nothing() -> None:
    h = handling()
    to_try(h)

    assert fail(h, "transient", retry_after=0.01) == Retry(0.1)


@pytest.mark.parametrize("retry_after", [math.inf, 30.0, 29.95])
def test_a_retry_that_would_start_at_or_past_complete_by_is_not_made(retry_after: float) -> None:
    h = handling()
    to_try(h)
    error = ConnectionError()

    decided = fail(
        h, "transient", error=error, now=NOW + timedelta(seconds=0.05), retry_after=retry_after
    )

    assert decided == GiveUp(error=error, tries=1)


@pytest.mark.parametrize("service", [None, "api"])
def test_a_transient_failure_out_of_tries_is_given_up(service: str | None) -> None:
    h = handling(service=service, policy=RetryPolicy(max_attempts=2, jitter=False))
    to_try(h)
    assert isinstance(fail(h, "transient"), Retry)
    h.slept()
    if service is not None:
        h.breaker_passed()
    error = TimeoutError("again")

    assert fail(h, "transient", error=error) == GiveUp(error=error, tries=2)
    assert h.retries == 2


@pytest.mark.parametrize("service", [None, "api"])
def test_a_bug_out_of_tries_is_replied_and_not_told_to_the_breaker(service: str | None) -> None:
    h = handling(service=service, policy=RetryPolicy(max_attempts=1))
    to_try(h)
    error = KeyError("x")

    decided = h.failed(
        error, "bug", retry_after=None, now=NOW, complete_by=LATER, rng=random.Random()
    )

    assert decided == ReplyError(error=error, bug=True, tries=1, answered=False)


def test_a_bug_whose_retry_would_pass_complete_by_is_replied_while_the_reply_counts() -> None:
    h = handling()
    to_try(h)
    error = ZeroDivisionError()

    decided = fail(h, "bug", error=error, now=LATER - timedelta(seconds=0.1))

    assert decided == ReplyError(error=error, bug=True, tries=1, answered=False)


def test_a_superseded_step_ends_without_a_reply() -> None:
    h = handling(service="api")
    to_try(h)

    assert h.superseded() is SUPERSEDED
    assert isinstance(SUPERSEDED, Superseded)


# --- an unknown resource -----------------------------------------------------------


def test_an_unknown_resource_found_waiting_for_a_slot_is_replied_with_no_try() -> None:
    h = handling(resource="nowhere", service="api")
    assert h.start() is Phase.SLOT
    error = LookupError("nowhere")

    assert h.refused(error) == ReplyError(error=error, bug=False, tries=0, answered=False)


def test_an_open_breaker_a_caller_does_not_wait_on_is_replied_and_tells_the_breaker_nothing() -> (
    None
):
    # A durable call's handling: its transient failure opened the breaker; the
    # next try is refused at once, and the refusal is no answer of the service.
    h = handling(resource="db", service="api")
    to_try(h)
    fail(h, "transient")
    assert h.slept() is Phase.BREAKER
    error = LookupError("open")

    assert h.breaker_open(error) == ReplyError(error=error, bug=False, tries=1, answered=False)


@pytest.mark.parametrize(("last", "answered"), [("transient", True), ("bug", False)])
def test_an_unknown_resource_found_at_a_later_rate_gate_follows_the_last_try(
    last: Any, answered: bool
) -> None:
    h = handling(resource="db", service="api")
    to_try(h)
    fail(h, last)
    assert h.slept() is Phase.BREAKER
    assert h.breaker_passed() is Phase.RATE
    error = LookupError("db")

    assert h.refused(error) == ReplyError(error=error, bug=False, tries=1, answered=answered)


def test_an_unknown_resource_without_a_breaker_tells_no_breaker() -> None:
    h = handling(resource="db")
    to_try(h)
    fail(h, "transient")
    h.slept()

    assert h.refused(LookupError()).answered is False


# --- complete_by -------------------------------------------------------------------


def test_a_handling_held_back_by_capacity_says_so() -> None:
    h = handling(resource="db", service="api")
    h.start()

    assert h.expired() == TimedOut(
        cause=Phase.SLOT,
        tries=0,
        held_back={
            "type": "CapacityFull",
            "message": "every slot of resource 'db' stayed taken until complete_by",
        },
        failure=None,
        bug=False,
        hung=False,
    )


def test_a_handling_held_back_by_the_rate_says_so_after_its_tries() -> None:
    h = handling(resource="db")
    to_try(h)
    error = TimeoutError()
    fail(h, "transient", error=error)
    assert h.slept() is Phase.RATE

    assert h.expired() == TimedOut(
        cause=Phase.RATE,
        tries=1,
        held_back={
            "type": "RateLimited",
            "message": "no call to resource 'db' was allowed by its rate before complete_by",
        },
        failure=error,
        bug=False,
        hung=False,
    )


def test_a_handling_held_back_by_the_breaker_names_the_service() -> None:
    h = handling(resource="db", service="api")
    h.start()
    h.slot_taken()

    timed_out = h.expired()

    assert timed_out.cause is Phase.BREAKER
    assert timed_out.held_back == {
        "type": "BreakerOpen",
        "message": "the circuit breaker of 'api' stayed open",
    }
    assert not timed_out.hung


@pytest.mark.parametrize("service", [None, "api"])
def test_a_try_cut_at_complete_by_hung_for_the_breaker(service: str | None) -> None:
    h = handling(service=service)
    to_try(h)

    assert h.expired() == TimedOut(
        cause=Phase.TRY, tries=1, held_back=None, failure=None, bug=False, hung=service is not None
    )


def test_a_try_cut_after_a_bug_notes_the_bug() -> None:
    h = handling(service="api")
    to_try(h)
    error = KeyError("k")
    fail(h, "bug", error=error)
    h.slept()
    h.breaker_passed()

    assert h.expired() == TimedOut(
        cause=Phase.TRY, tries=2, held_back=None, failure=error, bug=True, hung=True
    )


def test_a_report_cut_at_complete_by_counts_as_a_try_in_flight() -> None:
    h = handling(service="api")
    to_try(h)
    error = ConnectionError()
    assert (
        h.failed(
            error, "transient", retry_after=None, now=NOW, complete_by=LATER, rng=random.Random()
        )
        is Phase.REPORT
    )

    assert h.expired() == TimedOut(
        cause=Phase.REPORT, tries=1, held_back=None, failure=error, bug=False, hung=True
    )


def test_a_wait_between_tries_cut_at_complete_by_notes_the_last_failure() -> None:
    h = handling(service="api")
    to_try(h)
    error = ConnectionError()
    fail(h, "transient", error=error)

    assert h.expired() == TimedOut(
        cause=Phase.BACKOFF, tries=1, held_back=None, failure=error, bug=False, hung=False
    )


# --- random lives against a model ---------------------------------------------------

KINDS = st.sampled_from(["transient", "permanent", "bug"])


class HandlingLives(RuleBasedStateMachine):
    """Random events in the order a shell would tell them, checked against a model.

    The model keeps what the shell sees: the tries made, the failures decided
    (transient and bugs), the last failure, and what the handling asked for.
    """

    def __init__(self) -> None:
        super().__init__()
        self.h: Handling | None = None
        self.step: Next | None = None

    def _begin(self, resource: str | None, service: str | None, attempts: int) -> None:
        self.resource, self.service = resource, service
        self.policy = RetryPolicy(max_attempts=attempts, initial_delay=0.5, max_delay=4.0)
        self.now = NOW
        self.complete_by = NOW + timedelta(seconds=10)
        h = begin(
            complete_by=self.complete_by,
            now=self.now,
            retry=None,
            policy=self.policy,
            resource=resource,
            service=service,
        )
        assert isinstance(h, Handling)
        self.h = h
        self.tries = 0
        self.decided = 0
        self.last: tuple[BaseException, str] | None = None
        self.ended: list[Next] = []
        self.step = h.start()
        self._entered()

    def _entered(self) -> None:
        """Follow `step` into the model: a try entered counts one."""
        if self.step is Phase.TRY:
            self.tries += 1

    @precondition(lambda self: self.h is None or self.ended)
    @rule(
        resource=st.sampled_from([None, "db"]),
        service=st.sampled_from([None, "api"]),
        attempts=st.integers(1, 4),
    )
    def begin_one(self, resource: str | None, service: str | None, attempts: int) -> None:
        self._begin(resource, service, attempts)

    def _tell(self, step: Next) -> None:
        self.step = step
        if isinstance(step, ReplyResult | ReplyError | GiveUp | TimedOut | Superseded):
            self.ended.append(step)
        self._entered()

    def _live(self) -> bool:
        return self.h is not None and not self.ended

    @precondition(lambda self: self._live() and self.step is Phase.SLOT)
    @rule(unknown=st.booleans())
    def slot(self, unknown: bool) -> None:
        assert self.h is not None
        if unknown:
            error = LookupError("db")
            end = self.h.refused(error)
            assert end == ReplyError(error=error, bug=False, tries=0, answered=False)
            self._tell(end)
        else:
            self._tell(self.h.slot_taken())
            assert self.step in (Phase.BREAKER, Phase.RATE)

    @precondition(lambda self: self._live() and self.step is Phase.BREAKER)
    @rule()
    def breaker(self) -> None:
        assert self.h is not None
        self._tell(self.h.breaker_passed())
        assert self.step is (Phase.RATE if self.resource else Phase.TRY)

    @precondition(lambda self: self._live() and self.step is Phase.RATE)
    @rule(unknown=st.booleans())
    def rate(self, unknown: bool) -> None:
        assert self.h is not None
        if unknown:
            error = LookupError("db")
            end = self.h.refused(error)
            answered = (
                self.service is not None
                and self.tries > 0
                and (self.last is None or self.last[1] != "bug")
            )
            assert end == ReplyError(error=error, bug=False, tries=self.tries, answered=answered)
            self._tell(end)
        else:
            self._tell(self.h.token_taken())
            assert self.step is Phase.TRY

    @precondition(lambda self: self._live() and self.step is Phase.TRY)
    @rule()
    def succeed(self) -> None:
        assert self.h is not None
        end = self.h.succeeded()
        assert end == ReplyResult(answered=self.service is not None)
        self._tell(end)

    @precondition(lambda self: self._live() and self.step is Phase.TRY)
    @rule()
    def supersede(self) -> None:
        assert self.h is not None
        self._tell(self.h.superseded())

    @precondition(lambda self: self._live() and self.step is Phase.TRY)
    @rule(
        kind=KINDS,
        took=st.floats(0, 12),
        retry_after=st.none() | st.floats(0, 12),
        seed=st.integers(0, 2**16),
    )
    def fail(self, kind: Any, took: float, retry_after: float | None, seed: int) -> None:
        assert self.h is not None
        self.now += timedelta(seconds=took)
        error = RuntimeError(kind)
        self.last = (error, kind)
        step = self.h.failed(
            error,
            kind,
            retry_after=retry_after,
            now=self.now,
            complete_by=self.complete_by,
            rng=random.Random(seed),
        )
        if kind == "permanent":
            assert step == ReplyError(
                error=error, bug=False, tries=self.tries, answered=self.service is not None
            )
        elif kind == "transient" and self.service is not None:
            assert step is Phase.REPORT
            self.retry_after = retry_after
            self._tell(step)
            return
        else:
            self._decided(step, error, kind, retry_after, seed)
        self._tell(step)

    @precondition(lambda self: self._live() and self.step is Phase.REPORT)
    @rule(took=st.floats(0, 1), seed=st.integers(0, 2**16))
    def report(self, took: float, seed: int) -> None:
        assert self.h is not None
        assert self.last is not None
        self.now += timedelta(seconds=took)
        step = self.h.reported(now=self.now, complete_by=self.complete_by, rng=random.Random(seed))
        self._decided(step, self.last[0], self.last[1], self.retry_after, seed)
        self._tell(step)

    def _decided(
        self, step: Next, error: BaseException, kind: str, retry_after: float | None, seed: int
    ) -> None:
        """Check the decision after a failure the retry policy weighs."""
        self.decided += 1
        left = (self.complete_by - self.now).total_seconds()
        if isinstance(step, Retry):
            assert self.decided < self.policy.max_attempts
            assert 0 <= step.delay < left
            if retry_after is not None:
                assert step.delay >= retry_after
            cap = min(self.policy.max_delay, 0.5 * 2 ** (self.decided - 1))
            assert step.delay <= max(cap, retry_after or 0.0)
        elif kind == "bug":
            assert step == ReplyError(error=error, bug=True, tries=self.tries, answered=False)
        else:
            assert step == GiveUp(error=error, tries=self.tries)
        if not isinstance(step, Retry):
            backoff = random.Random(seed).uniform(0.0, min(4.0, 0.5 * 2 ** (self.decided - 1)))
            out_of_tries = self.decided >= self.policy.max_attempts
            assert out_of_tries or max(backoff, retry_after or 0.0) >= left

    @precondition(lambda self: self._live() and isinstance(self.step, Retry))
    @rule()
    def sleep(self) -> None:
        assert self.h is not None
        assert isinstance(self.step, Retry)
        self.now += timedelta(seconds=self.step.delay)
        after = self.h.slept()
        assert after is not Phase.SLOT
        self._tell(after)

    @precondition(lambda self: self._live())
    @rule()
    def expire(self) -> None:
        assert self.h is not None
        phase = Phase.BACKOFF if isinstance(self.step, Retry) else self.step
        end = self.h.expired()
        assert end.cause is phase
        assert end.tries == self.tries
        held = phase in (Phase.SLOT, Phase.RATE, Phase.BREAKER)
        assert (end.held_back is not None) is held
        assert end.hung is (self.service is not None and phase in (Phase.TRY, Phase.REPORT))
        assert end.failure is (None if self.last is None else self.last[0])
        assert end.bug is (self.last is not None and self.last[1] == "bug")
        self._tell(end)

    @invariant()
    def counts_agree(self) -> None:
        if self.h is None:
            return
        h = self.h
        assert h.tries == self.tries
        assert h.retries == self.decided
        assert h.tries <= self.policy.max_attempts
        if not self.ended:
            in_flight = self.step in (Phase.TRY, Phase.REPORT)
            assert h.tries - h.retries == (1 if in_flight else 0)
            if isinstance(self.step, Phase):
                assert h.phase is self.step
            else:
                assert h.phase is Phase.BACKOFF
            if self.step is Phase.BREAKER:
                assert self.service is not None
            if self.step in (Phase.SLOT, Phase.RATE):
                assert self.resource is not None
            if self.step is Phase.SLOT:
                assert h.tries == 0


HandlingLives.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
test_handling_lives = HandlingLives.TestCase


@given(
    window=st.floats(0.001, 100),
    elapsed=st.floats(0, 100),
    attempts=st.integers(1, 10),
    seed=st.integers(0, 2**32),
)
def test_a_retry_always_starts_before_complete_by(
    window: float, elapsed: float, attempts: int, seed: int
) -> None:
    complete_by = NOW + timedelta(seconds=window)
    h = begin(
        complete_by=complete_by,
        now=NOW,
        retry=None,
        policy=RetryPolicy(max_attempts=attempts),
        resource=None,
        service=None,
    )
    assert isinstance(h, Handling)
    assert h.start() is Phase.TRY
    now = NOW + timedelta(seconds=elapsed)

    decided = h.failed(
        OSError(),
        "transient",
        retry_after=None,
        now=now,
        complete_by=complete_by,
        rng=random.Random(seed),
    )

    if isinstance(decided, Retry):
        assert now + timedelta(seconds=decided.delay) < complete_by
        assert attempts > 1
    else:
        assert isinstance(decided, GiveUp)
