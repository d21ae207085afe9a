from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shepherd.clock import Clock, SystemClock
from shepherd.testing import FakeClock, wait_until


async def test_wait_until_returns_once_true() -> None:
    calls = 0

    def ready() -> bool:
        nonlocal calls
        calls += 1
        return calls >= 3

    await wait_until(ready, timeout=5.0, interval=0.001)
    assert calls == 3


async def test_wait_until_awaits_async_predicates() -> None:
    calls = 0

    async def ready() -> bool:
        nonlocal calls
        calls += 1
        return calls >= 2

    await wait_until(ready, interval=0.001)
    assert calls == 2


async def test_wait_until_times_out_with_the_message() -> None:
    with pytest.raises(AssertionError, match=r"^never happened$"):
        await wait_until(lambda: False, timeout=0.05, interval=0.01, message="never happened")


async def test_wait_until_default_message() -> None:
    with pytest.raises(AssertionError, match=r"not met within 0\.02 s"):
        await wait_until(lambda: False, timeout=0.02)


def test_fake_clock_moves_only_when_told(fake_clock: FakeClock) -> None:
    start, mono = fake_clock.now(), fake_clock.monotonic()
    assert start.tzinfo is UTC
    assert fake_clock.now() == start
    fake_clock.advance(1.5)
    fake_clock.advance(timedelta(seconds=2))
    assert fake_clock.now() - start == timedelta(seconds=3.5)
    assert fake_clock.monotonic() - mono == 3.5


def test_fake_clock_start_is_settable_and_converted_to_utc() -> None:
    start = datetime(2024, 5, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    clock = FakeClock(start, monotonic_start=100.0)
    assert clock.now() == start
    assert clock.now().tzinfo is UTC
    assert clock.monotonic() == 100.0


def test_fake_clock_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="aware"):
        FakeClock(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="backwards"):
        FakeClock().advance(-1)


def test_both_clocks_satisfy_the_protocol() -> None:
    clocks: list[Clock] = [SystemClock(), FakeClock()]
    for clock in clocks:
        assert clock.now().utcoffset() == timedelta(0)
        assert clock.monotonic() <= clock.monotonic()
