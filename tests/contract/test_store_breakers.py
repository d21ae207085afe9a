"""The shared circuit breakers: one row per service, every process deciding through it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.breaker import Breaker, BreakerPolicy, BreakerState, Call, Probe, Wait
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

POLICY = BreakerPolicy(failure_threshold=3, cool_down=10.0)
COOL_DOWN = timedelta(seconds=10)


async def fail(store: Store, times: int, service: str = "pay") -> Breaker:
    b = Breaker(service=service)
    for _ in range(times):
        _, b = await store.breaker_report(service, POLICY, failed=True)
    return b


async def test_an_unknown_service_is_closed_and_allows_calls(store: Store) -> None:
    b, decision = await store.breaker_allow("pay", POLICY)

    assert (b.service, b.state, b.version) == ("pay", BreakerState.CLOSED, 0)
    assert decision == Call()
    assert await store.breaker_events() == []


async def test_the_threshold_of_failures_opens_the_breaker(
    store: Store, fake_clock: FakeClock
) -> None:
    before, counted = await store.breaker_report("pay", POLICY, failed=True)
    assert before == Breaker(service="pay")
    assert (counted.state, counted.consecutive_failures) == (BreakerState.CLOSED, 1)

    opened = await fail(store, 2)

    assert opened.state is BreakerState.OPEN
    assert opened.opened_at == fake_clock.now()
    assert await store.get_breaker("pay") == opened
    b, decision = await store.breaker_allow("pay", POLICY)
    assert b == opened
    assert decision == Wait(until=fake_clock.now() + COOL_DOWN)


async def test_open_waits_until_the_cool_down_then_allows_one_probe(
    store: Store, fake_clock: FakeClock
) -> None:
    opened = await fail(store, 3)
    assert opened.opened_at is not None
    fake_clock.advance(9.5)
    _, decision = await store.breaker_allow("pay", POLICY)
    assert decision == Wait(until=opened.opened_at + COOL_DOWN)
    fake_clock.advance(0.5)

    probing, first = await store.breaker_allow("pay", POLICY)
    _, second = await store.breaker_allow("pay", POLICY)

    assert first == Probe()
    assert probing.state is BreakerState.HALF_OPEN
    assert probing.probe_started_at == fake_clock.now()
    assert isinstance(second, Wait)


async def test_only_one_probe_among_many_concurrent_callers_in_many_processes(
    stores: Stores, fake_clock: FakeClock
) -> None:
    processes = [await stores.connect() for _ in range(4)]
    await fail(processes[0], 3)
    fake_clock.advance(10)

    outcomes = await asyncio.gather(
        *(p.breaker_allow("pay", POLICY) for p in processes for _ in range(10))
    )

    decisions = [decision for _, decision in outcomes]
    assert sum(isinstance(d, Probe) for d in decisions) == 1
    assert sum(isinstance(d, Wait) for d in decisions) == len(decisions) - 1
    assert len([e for e in await processes[1].breaker_events() if e.to_state == "half_open"]) == 1


async def test_a_successful_probe_closes_and_a_failed_one_reopens(
    store: Store, fake_clock: FakeClock
) -> None:
    await fail(store, 3)
    fake_clock.advance(10)
    await store.breaker_allow("pay", POLICY)
    fake_clock.advance(1)

    before, reopened = await store.breaker_report("pay", POLICY, failed=True)
    assert (before.state, reopened.state) == (BreakerState.HALF_OPEN, BreakerState.OPEN)
    assert reopened.opened_at == fake_clock.now()

    fake_clock.advance(10)
    _, decision = await store.breaker_allow("pay", POLICY)
    assert decision == Probe()
    _, closed = await store.breaker_report("pay", POLICY, failed=False)
    assert (closed.state, closed.consecutive_failures) == (BreakerState.CLOSED, 0)
    assert closed.opened_at is None
    assert (await store.breaker_allow("pay", POLICY))[1] == Call()


async def test_every_change_of_state_is_an_event_newest_first(
    store: Store, fake_clock: FakeClock
) -> None:
    await fail(store, 3)
    opened_at = fake_clock.now()
    fake_clock.advance(10)
    await store.breaker_allow("pay", POLICY)
    await store.breaker_allow("pay", POLICY)  # waits: no change, no event
    await store.breaker_report("pay", POLICY, failed=False)
    await fail(store, 1, service="other")

    events = await store.breaker_events()

    assert [(e.service, str(e.from_state), str(e.to_state)) for e in events] == [
        ("pay", "half_open", "closed"),
        ("pay", "open", "half_open"),
        ("pay", "closed", "open"),
    ]
    assert events[0].id > events[1].id > events[2].id
    assert events[2].at == opened_at
    assert events[2].detail == {
        "reason": "consecutive_failures",
        "consecutive_failures": 3,
        "window_calls": 3,
        "window_failures": 3,
        "cool_down": 10.0,
    }
    assert events[1].detail["reason"] == "cool_down"
    assert events[0].detail["reason"] == "probe_succeeded"
    assert [e.to_state for e in await store.breaker_events(service="pay", limit=1)] == [
        BreakerState.CLOSED
    ]
    assert await store.breaker_events(service="other") == []


async def test_the_latest_change_of_each_breaker_in_one_read(
    store: Store, fake_clock: FakeClock
) -> None:
    await fail(store, 3)  # pay: closed -> open
    fake_clock.advance(10)
    await store.breaker_allow("pay", POLICY)  # pay: open -> half_open
    await fail(store, 3, service="mail")  # mail: closed -> open
    await fail(store, 1, service="calm")  # counted, never changed

    latest = await store.latest_breaker_events(["pay", "mail", "calm", "never"])

    assert {service: str(e.to_state) for service, e in latest.items()} == {
        "pay": "half_open",
        "mail": "open",
    }
    (newest_of_pay,) = await store.breaker_events(service="pay", limit=1)
    assert latest["pay"] == newest_of_pay
    assert await store.latest_breaker_events([]) == {}


async def test_a_change_of_state_rings_breakers_and_a_count_does_not(store: Store) -> None:
    wake = store.signals.event(ch.BREAKERS)
    await fail(store, 2)
    assert not wake.is_set()

    await fail(store, 1)

    assert wake.is_set()


async def test_list_breakers_shows_every_used_service(store: Store) -> None:
    await fail(store, 3, service="pay")
    await store.breaker_report("ship", POLICY, failed=False)
    await store.breaker_allow("mail", POLICY)

    listed = await store.list_breakers()

    assert [(b.service, b.state) for b in listed] == [
        ("mail", BreakerState.CLOSED),
        ("pay", BreakerState.OPEN),
        ("ship", BreakerState.CLOSED),
    ]
    assert await store.get_breaker("nobody") is None


async def test_concurrent_failures_from_many_processes_are_all_counted(
    stores: Stores,
) -> None:
    processes = [await stores.connect() for _ in range(3)]
    policy = BreakerPolicy(failure_threshold=100)

    await asyncio.gather(
        *(p.breaker_report("pay", policy, failed=True) for p in processes for _ in range(10))
    )

    b = await processes[0].get_breaker("pay")
    assert b is not None
    assert (b.consecutive_failures, b.window_calls, b.version) == (30, 30, 30)
