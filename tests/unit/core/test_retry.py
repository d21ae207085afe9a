from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.retry import RetryPolicy, backoff_delay, capped_exponential, next_retry

NOW = datetime(2030, 1, 1, tzinfo=UTC)
NO_JITTER = RetryPolicy(initial_delay=0.1, max_delay=1.0, multiplier=2.0, jitter=False)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"initial_delay": -0.1}, "initial_delay"),
        ({"initial_delay": math.nan}, "initial_delay"),
        ({"initial_delay": math.inf, "max_delay": math.inf}, "initial_delay"),
        ({"initial_delay": 2.0, "max_delay": 1.0}, "max_delay"),
        ({"max_delay": math.inf}, "max_delay"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"multiplier": math.nan}, "multiplier"),
    ],
)
def test_invalid_policy_names_the_field(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RetryPolicy(**changes)  # type: ignore[arg-type]


def test_defaults_are_valid() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.initial_delay, policy.max_delay) == (5, 0.05, 5.0)
    assert policy.multiplier == 2.0
    assert policy.jitter


@pytest.mark.parametrize(
    ("failures", "expected"), [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0)]
)
def test_backoff_is_capped_exponential(failures: int, expected: float) -> None:
    assert backoff_delay(NO_JITTER, failures, random.Random(0)) == pytest.approx(expected)


def test_backoff_rejects_zero_failures() -> None:
    with pytest.raises(ValueError, match="failures"):
        backoff_delay(NO_JITTER, 0, random.Random(0))


def test_backoff_survives_huge_exponents() -> None:
    assert backoff_delay(NO_JITTER, 100_000, random.Random(0)) == 1.0


def test_capped_exponential_with_zero_initial_is_zero() -> None:
    assert capped_exponential(0.0, 10.0, 5.0, 10_000) == 0.0


@settings(max_examples=150)
@given(failures=st.integers(1, 200), seed=st.integers(0, 2**32))
def test_full_jitter_stays_within_the_capped_delay(failures: int, seed: int) -> None:
    policy = RetryPolicy(initial_delay=0.05, max_delay=5.0, multiplier=3.0, jitter=True)
    cap = backoff_delay(
        RetryPolicy(initial_delay=0.05, max_delay=5.0, multiplier=3.0, jitter=False),
        failures,
        random.Random(seed),
    )
    delay = backoff_delay(policy, failures, random.Random(seed))
    assert 0.0 <= delay <= cap <= 5.0


def test_jitter_is_deterministic_for_a_seed() -> None:
    policy = RetryPolicy()
    assert backoff_delay(policy, 3, random.Random(7)) == backoff_delay(policy, 3, random.Random(7))


def test_next_retry_without_deadline() -> None:
    assert next_retry(NO_JITTER, 1, random.Random(0), now=NOW, complete_by=None) == 0.1


def test_next_retry_gives_up_when_attempts_are_spent() -> None:
    policy = RetryPolicy(max_attempts=3, jitter=False)
    assert next_retry(policy, 2, random.Random(0), now=NOW, complete_by=None) is not None
    assert next_retry(policy, 3, random.Random(0), now=NOW, complete_by=None) is None
    assert next_retry(policy, 4, random.Random(0), now=NOW, complete_by=None) is None


def test_a_single_attempt_never_retries() -> None:
    policy = RetryPolicy(max_attempts=1)
    assert next_retry(policy, 1, random.Random(0), now=NOW, complete_by=None) is None


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [(0.2, 0.1), (0.1, None), (0.05, None), (-1.0, None)],
)
def test_next_retry_never_reaches_complete_by(remaining: float, expected: float | None) -> None:
    complete_by = NOW + timedelta(seconds=remaining)
    assert next_retry(NO_JITTER, 1, random.Random(0), now=NOW, complete_by=complete_by) == expected


def test_retry_after_raises_the_delay() -> None:
    delay = next_retry(NO_JITTER, 1, random.Random(0), now=NOW, complete_by=None, retry_after=3.0)
    assert delay == 3.0


def test_retry_after_below_the_backoff_changes_nothing() -> None:
    delay = next_retry(NO_JITTER, 3, random.Random(0), now=NOW, complete_by=None, retry_after=0.1)
    assert delay == pytest.approx(0.4)


def test_retry_after_past_complete_by_gives_up() -> None:
    complete_by = NOW + timedelta(seconds=2)
    delay = next_retry(
        NO_JITTER, 1, random.Random(0), now=NOW, complete_by=complete_by, retry_after=2.0
    )
    assert delay is None


@pytest.mark.parametrize("retry_after", [-1.0, math.nan])
def test_a_meaningless_retry_after_is_ignored(retry_after: float) -> None:
    delay = next_retry(
        NO_JITTER, 1, random.Random(0), now=NOW, complete_by=None, retry_after=retry_after
    )
    assert delay == 0.1


@pytest.mark.parametrize("complete_by", [None, NOW + timedelta(days=1)])
def test_an_infinite_retry_after_gives_up(complete_by: datetime | None) -> None:
    delay = next_retry(
        NO_JITTER, 1, random.Random(0), now=NOW, complete_by=complete_by, retry_after=math.inf
    )
    assert delay is None


def test_next_retry_rejects_zero_failures() -> None:
    with pytest.raises(ValueError, match="failures"):
        next_retry(NO_JITTER, 0, random.Random(0), now=NOW, complete_by=None)


@given(
    max_attempts=st.integers(1, 50),
    initial_delay=st.floats(0, 10),
    extra=st.floats(0, 100),
    multiplier=st.floats(1, 10),
    jitter=st.booleans(),
)
def test_a_policy_survives_its_json(
    max_attempts: int, initial_delay: float, extra: float, multiplier: float, jitter: bool
) -> None:
    policy = RetryPolicy(
        max_attempts=max_attempts,
        initial_delay=initial_delay,
        max_delay=initial_delay + extra,
        multiplier=multiplier,
        jitter=jitter,
    )

    assert RetryPolicy.from_json(policy.to_json()) == policy


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ([1, 2], "JSON object"),
        ({"max_attempts": 3, "tries": 1}, "tries"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"jitter": "yes"}, "jitter"),
    ],
)
def test_a_bad_policy_json_names_what_is_wrong(value: object, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        RetryPolicy.from_json(value)
