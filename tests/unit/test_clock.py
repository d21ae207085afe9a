"""Waiting on a clock: sleeps, deadline scopes and timed waits, on the fake clock and the real one.

The fake clock's waits end only when a test moves it; each `await asyncio.sleep(0)`
below lets the woken tasks take their turn on the event loop (an ordering step,
not a delay).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from shepherd.clock import Clock, Deadline, Stopwatch, SystemClock
from shepherd.testing import FakeClock, advance_until


async def turns(n: int = 3) -> None:
    """Let woken tasks run: a few turns of the event loop."""
    for _ in range(n):
        await asyncio.sleep(0)


# -- sleep ---------------------------------------------------------------------------


async def test_a_sleep_ends_only_once_the_clock_has_moved_far_enough(
    fake_clock: FakeClock,
) -> None:
    sleeper = asyncio.create_task(fake_clock.sleep(1.0))
    await turns()
    assert not sleeper.done()

    fake_clock.advance(0.5)
    await turns()
    assert not sleeper.done()

    fake_clock.advance(0.5)
    await turns()
    assert sleeper.done()


async def test_sleepers_wake_in_the_order_of_their_times(fake_clock: FakeClock) -> None:
    woke: list[str] = []

    async def sleep(name: str, seconds: float) -> None:
        await fake_clock.sleep(seconds)
        woke.append(name)

    tasks = [
        asyncio.create_task(sleep(name, seconds))
        for name, seconds in [("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("late", 9.0)]
    ]
    await turns()
    assert fake_clock.wakeups() == [1.0, 2.0, 2.0, 3.0, 9.0]

    fake_clock.advance(5)
    await turns()

    assert woke == ["a", "b1", "b2", "c"]
    assert fake_clock.wakeups() == [4.0]
    tasks[-1].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_sleeper_that_sleeps_again_counts_from_the_new_time(
    fake_clock: FakeClock,
) -> None:
    ticks: list[float] = []

    async def periodic() -> None:
        while True:
            await fake_clock.sleep(1.0)
            ticks.append(fake_clock.monotonic())

    task = asyncio.create_task(periodic())
    await turns()
    fake_clock.advance(10)
    await turns()
    assert ticks == [10.0]
    assert fake_clock.wakeups() == [1.0]

    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert fake_clock.wakeups() == []


async def test_a_zero_sleep_ends_at_the_next_turn_without_moving_the_clock(
    fake_clock: FakeClock,
) -> None:
    await asyncio.wait_for(fake_clock.sleep(0), timeout=5)
    await asyncio.wait_for(fake_clock.sleep(-1), timeout=5)
    assert fake_clock.monotonic() == 0.0


async def test_a_cancelled_timer_never_runs(fake_clock: FakeClock) -> None:
    ran: list[int] = []
    timer = fake_clock.call_later(1.0, lambda: ran.append(1))
    fake_clock.call_later(2.0, lambda: ran.append(2))
    timer.cancel()
    assert fake_clock.wakeups() == [2.0]

    fake_clock.advance(2)

    assert ran == [2]


async def test_a_failing_timer_is_reported_to_the_loop_and_the_others_still_run(
    fake_clock: FakeClock,
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    ran: list[int] = []

    def boom() -> None:
        raise RuntimeError("boom")

    fake_clock.call_later(1.0, boom)
    fake_clock.call_later(1.0, lambda: ran.append(1))
    try:
        fake_clock.advance(1)
    finally:
        loop.set_exception_handler(None)

    assert ran == [1]
    assert [str(c["exception"]) for c in reported] == ["boom"]


async def test_waits_that_ended_early_leave_no_pending_wakeups(fake_clock: FakeClock) -> None:
    event = asyncio.Event()
    event.set()
    for _ in range(1000):
        timer = fake_clock.call_later(60.0, lambda: None)
        timer.cancel()
    assert fake_clock.wakeups() == []
    assert await fake_clock.wait_event(event, 60.0) is True


# -- deadline scopes -----------------------------------------------------------------


async def test_a_deadline_cancels_its_body_at_its_instant(fake_clock: FakeClock) -> None:
    reached: list[str] = []

    async def body() -> Deadline:
        async with fake_clock.deadline(fake_clock.now() + timedelta(seconds=5)) as scope:
            reached.append("in")
            await asyncio.Event().wait()
        reached.append("never")  # pragma: no cover
        return scope  # pragma: no cover

    task = asyncio.create_task(body())
    await turns()
    fake_clock.advance(4.9)
    await turns()
    assert not task.done()
    assert reached == ["in"]

    fake_clock.advance(0.1)
    with pytest.raises(TimeoutError):
        await task


async def test_expired_tells_the_deadline_from_another_timeout(fake_clock: FakeClock) -> None:
    scope = fake_clock.deadline(fake_clock.now() + timedelta(seconds=1))

    async def body() -> None:
        async with scope:
            await fake_clock.sleep(60)

    task = asyncio.create_task(body())
    await turns()
    fake_clock.advance(1)
    with pytest.raises(TimeoutError):
        await task
    assert scope.expired()

    mine = fake_clock.deadline(fake_clock.now() + timedelta(seconds=60))
    with pytest.raises(TimeoutError):
        async with mine:
            raise TimeoutError("the body's own")
    assert not mine.expired()


async def test_a_deadline_on_a_store_instant_is_read_against_the_store_now(
    fake_clock: FakeClock,
) -> None:
    # The store's clock runs 100 s ahead: complete_by is 3 s away on it.
    store_now = fake_clock.now() + timedelta(seconds=100)
    scope = fake_clock.deadline(store_now + timedelta(seconds=3), now=store_now)
    assert scope.remaining() == 3.0


async def test_a_passed_deadline_cancels_at_the_first_await(fake_clock: FakeClock) -> None:
    scope = fake_clock.deadline(fake_clock.now() - timedelta(seconds=1))
    with pytest.raises(TimeoutError):
        async with scope:
            await asyncio.Event().wait()
    assert scope.expired()


async def test_a_rescheduled_deadline_moves(fake_clock: FakeClock) -> None:
    entered = asyncio.Event()
    scope = fake_clock.deadline(fake_clock.now() + timedelta(seconds=2))

    async def body() -> None:
        async with scope:
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await entered.wait()
    scope.reschedule(fake_clock.now() + timedelta(seconds=10))
    assert fake_clock.wakeups() == [10.0]
    fake_clock.advance(5)
    await turns()
    assert not task.done()

    fake_clock.advance(5)
    with pytest.raises(TimeoutError):
        await task
    with pytest.raises(RuntimeError, match="expired"):
        scope.reschedule(fake_clock.now())


async def test_a_deadline_left_in_time_fires_nothing_later(fake_clock: FakeClock) -> None:
    scope = fake_clock.deadline(fake_clock.now() + timedelta(seconds=1))
    async with scope:
        await fake_clock.sleep(0)
    assert fake_clock.wakeups() == []

    fake_clock.advance(5)
    await fake_clock.sleep(0)  # no stray cancellation lands on this task
    assert not scope.expired()
    with pytest.raises(RuntimeError, match="exited"):
        scope.reschedule(fake_clock.now())


async def test_another_cancellation_passes_through_a_deadline(fake_clock: FakeClock) -> None:
    scope = fake_clock.deadline(fake_clock.now() + timedelta(seconds=60))
    entered = asyncio.Event()

    async def body() -> None:
        async with scope:
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not scope.expired()


async def test_a_cancel_arriving_with_the_deadline_is_not_swallowed(
    fake_clock: FakeClock,
) -> None:
    entered = asyncio.Event()

    async def body() -> None:
        async with fake_clock.deadline(fake_clock.now() + timedelta(seconds=1)):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await entered.wait()
    fake_clock.advance(1)  # the deadline cancels the task...
    task.cancel()  # ...and so does its owner, in the same turn
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_deadline_is_entered_once_and_inside_a_task(fake_clock: FakeClock) -> None:
    scope = fake_clock.deadline(fake_clock.now() + timedelta(seconds=1))
    async with scope:
        pass
    with pytest.raises(RuntimeError, match="only once"):
        async with scope:
            pass  # pragma: no cover


# -- timed waits ---------------------------------------------------------------------


async def test_a_timed_wait_ends_on_the_event_or_once_the_clock_moved(
    fake_clock: FakeClock,
) -> None:
    event = asyncio.Event()
    rung = asyncio.create_task(fake_clock.wait_event(event, 5.0))
    timed_out = asyncio.create_task(fake_clock.wait_event(asyncio.Event(), 5.0))
    await turns()
    event.set()
    assert await rung is True

    fake_clock.advance(5)
    assert await timed_out is False
    assert await fake_clock.wait_event(event, 5.0) is True


async def test_a_cancel_arriving_with_the_event_is_not_swallowed(fake_clock: FakeClock) -> None:
    event = asyncio.Event()
    waiter = asyncio.create_task(fake_clock.wait_event(event, 60.0))
    await turns()
    event.set()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter


# -- set, and the real clock ---------------------------------------------------------


async def test_set_moves_to_an_instant_and_wakes_who_is_due(fake_clock: FakeClock) -> None:
    sleeper = asyncio.create_task(fake_clock.sleep(30))
    await turns()
    fake_clock.set(fake_clock.now() + timedelta(seconds=30))
    await sleeper
    with pytest.raises(ValueError, match="backwards"):
        fake_clock.set(fake_clock.now() - timedelta(seconds=1))
    with pytest.raises(ValueError, match="aware"):
        fake_clock.set(fake_clock.now().replace(tzinfo=None))


async def test_the_system_clock_waits_on_the_event_loop() -> None:
    clock: Clock = SystemClock()
    await clock.sleep(0)
    with pytest.raises(TimeoutError):
        async with clock.deadline(clock.now() - timedelta(seconds=1)) as scope:
            await asyncio.Event().wait()
    assert scope.expired()
    event = asyncio.Event()
    event.set()
    assert await clock.wait_event(event, 60.0) is True
    assert await clock.wait_event(asyncio.Event(), 0.01) is False
    ran = asyncio.Event()
    clock.call_later(0, ran.set)
    await asyncio.wait_for(ran.wait(), timeout=5)


async def test_the_system_clock_reschedules_a_deadline() -> None:
    clock = SystemClock()
    async with clock.deadline(clock.now() - timedelta(seconds=1)) as scope:
        scope.reschedule(clock.now() + timedelta(hours=1))
        await asyncio.sleep(0)
    assert not scope.expired()


# -- advance_until -------------------------------------------------------------------


async def test_advance_until_moves_one_wakeup_at_a_time(fake_clock: FakeClock) -> None:
    woke_at: list[float] = []

    async def sleeper() -> None:
        await fake_clock.sleep(0.3)
        woke_at.append(fake_clock.monotonic())

    task = asyncio.create_task(sleeper())
    await turns()
    await advance_until(fake_clock, lambda: bool(woke_at), step=1.0, interval=0)
    await task

    assert woke_at == [0.3]  # not jumped over: the clock stopped at the sleeper's time


async def test_advance_until_fails_with_its_message(fake_clock: FakeClock) -> None:
    with pytest.raises(AssertionError, match="never"):
        await advance_until(fake_clock, lambda: False, step=1.0, timeout=0.05, message="never")
    assert fake_clock.monotonic() > 0
    with pytest.raises(ValueError, match="step"):
        await advance_until(fake_clock, lambda: True, step=0)


async def test_advance_until_moves_past_a_remainder_too_small_to_move_the_clock() -> None:
    # A loop that sleeps what is left of a period, computed as `period - (now - at)`,
    # can find a remainder so small that `now + remainder == now` in floating point:
    # its wake-up is then due "now" at every look, and moves of 0 s never end it.
    at = 15.639858528749018  # found by search: here the remainder rounds away
    clock = FakeClock(monotonic_start=at)
    period = 0.5
    rounds = 0

    async def renewer() -> None:
        nonlocal at, rounds
        while True:
            left = period - (clock.monotonic() - at)
            if left <= 0:
                at = clock.monotonic()
                rounds += 1
                continue
            await clock.sleep(left)

    task = asyncio.create_task(renewer())
    await turns()
    clock.advance(15.858249305784293 - at)
    try:
        await advance_until(clock, lambda: rounds >= 2, step=1.0, timeout=5, interval=0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# -- stopwatch -----------------------------------------------------------------------


async def test_a_stopwatch_counts_nothing_before_its_mark(fake_clock: FakeClock) -> None:
    assert Stopwatch(fake_clock).since() is None


async def test_a_fake_clock_moved_on_while_the_loop_waited_is_no_hold_up(
    fake_clock: FakeClock,
) -> None:
    watch = Stopwatch(fake_clock)
    watch.mark()
    fake_clock.advance(30.0)  # a test moves time: the event loop was never held back
    since = watch.since()
    assert since is not None
    assert since < 30.0


async def test_on_the_real_clock_a_stopwatch_counts_real_time() -> None:
    watch = Stopwatch(SystemClock())
    watch.mark()
    await asyncio.sleep(0.01)  # the time measured, not a synchronisation
    since = watch.since()
    assert since is not None
    assert since >= 0.01
