"""A resource's token bucket: never more than `burst + rate * t` tokens in any `t` seconds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shepherd.core.rates import Bucket, burst_of, take


def test_a_full_bucket_grants_a_seconds_worth_then_waits_for_the_next_token() -> None:
    first = take(Bucket.full(10.0, at=0.0), rate=10.0, want=15, now=0.0)
    assert first.granted == 10
    assert first.wait == pytest.approx(0.1)

    later = take(first.bucket, rate=10.0, want=15, now=0.55)
    assert later.granted == 5
    assert later.wait == pytest.approx(0.05)


def test_a_slow_rate_holds_one_token_at_most() -> None:
    assert burst_of(0.5) == 1.0
    first = take(Bucket.full(0.5, at=0.0), rate=0.5, want=3, now=100.0)
    assert first.granted == 1
    assert first.wait == pytest.approx(2.0)


def test_asking_for_none_or_within_the_bucket_waits_for_nothing() -> None:
    assert take(Bucket.full(5.0, at=0.0), rate=5.0, want=0, now=1.0).wait == 0.0
    assert take(Bucket.full(5.0, at=0.0), rate=5.0, want=5, now=1.0).wait == 0.0


def test_a_clock_that_went_back_refills_nothing() -> None:
    empty = Bucket(tokens=0.0, at=10.0)
    again = take(empty, rate=10.0, want=1, now=9.0)
    assert (again.granted, again.bucket.at) == (0, 10.0)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="rate"):
        take(Bucket.full(1.0, at=0.0), rate=0.0, want=1, now=0.0)
    with pytest.raises(ValueError, match="want"):
        take(Bucket.full(1.0, at=0.0), rate=1.0, want=-1, now=0.0)


@given(
    rate=st.floats(min_value=0.1, max_value=500.0),
    steps=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=3.0), st.integers(0, 40)),
        min_size=1,
        max_size=60,
    ),
)
def test_no_span_is_granted_more_than_burst_plus_rate_times_its_length(
    rate: float, steps: list[tuple[float, int]]
) -> None:
    bucket = Bucket.full(rate, at=0.0)
    now = 0.0
    grants: list[tuple[float, int]] = []
    for gap, want in steps:
        now += gap
        outcome = take(bucket, rate=rate, want=want, now=now)
        assert 0 <= outcome.granted <= want
        assert outcome.wait >= 0.0
        if outcome.granted < want:
            assert outcome.wait > 0.0
        bucket = outcome.bucket
        grants.append((now, outcome.granted))
    for i, (start, _) in enumerate(grants):
        total = 0
        for at, granted in grants[i:]:
            total += granted
            assert total <= burst_of(rate) + rate * (at - start) + 1e-6
