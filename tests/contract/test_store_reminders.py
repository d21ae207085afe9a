"""Reminders in the store: set, replaced, forgotten, listed; fired once per tick as a key's calls."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.errors import PayloadError

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

AGENT = "events.write"


async def remind(
    store: Store,
    name: str,
    *,
    key: str = "csv",
    every: float | None = 1.0,
    delay: float | None = None,
    at: datetime | None = None,
) -> None:
    await store.set_reminder(
        AGENT, key, name, {"flush": name}, delay=delay, at=at, every=every, within=5.0, attempts=3
    )


async def owner_takes(store: Store, key: str = "csv") -> list[tuple[str | None, datetime | None]]:
    """Every waiting call of `key`, as its owner takes and answers them, in order."""
    (taken,) = await store.take_keys(AGENT, [key], owner="p1", lease=10.0)
    epoch = taken.lease.epoch
    calls, _ = await store.take_key_calls(AGENT, key, owner="p1", epoch=epoch, limit=100)
    await store.answer_owned(
        AGENT,
        key,
        owner="p1",
        epoch=epoch,
        answers=[(c.call_id, c.attempt, True, None) for c in calls],
    )
    return [(c.reminder, c.reminder_at) for c in calls]


async def test_a_periodic_reminder_fires_once_per_tick_and_skips_ticks_while_waiting(
    store: Store, fake_clock: FakeClock
) -> None:
    start = fake_clock.now()
    await remind(store, "flush", delay=1.0)
    assert await store.fire_reminders(limit=10) == (0, start + timedelta(seconds=1))
    assert await store.next_reminder() == start + timedelta(seconds=1)
    fake_clock.advance(1.5)
    assert await store.fire_reminders(limit=10) == (1, start + timedelta(seconds=2))
    assert await store.fire_reminders(limit=10) == (0, start + timedelta(seconds=2))  # fired once
    fake_clock.advance(1)  # tick 2 is due, but tick 1's call is unanswered: skipped
    assert await store.fire_reminders(limit=10) == (0, start + timedelta(seconds=3))
    assert await store.waiting_keys(AGENT) == ["csv"]
    assert await owner_takes(store) == [("flush", start + timedelta(seconds=1))]
    fake_clock.advance(5)  # ticks 3 to 7 missed: the latest is fired, once
    assert await store.fire_reminders(limit=10) == (1, start + timedelta(seconds=8))
    (reminder,) = await store.list_reminders(AGENT)
    assert (reminder.key, reminder.name, reminder.payload) == ("csv", "flush", {"flush": "flush"})
    assert reminder.fired_at == fake_clock.now()
    assert await owner_takes(store) == [("flush", start + timedelta(seconds=7))]


async def test_reminders_are_calls_of_their_key_in_order_with_the_others(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.send_call(
        "before", AGENT, {"e": 1}, within=5.0, max_attempts=3, expires_in=60.0, owner_key="csv"
    )
    await remind(store, "once", every=None)  # neither delay nor at: now
    await remind(store, "other-key", key="json", every=None, delay=0)
    assert (await store.fire_reminders(limit=10))[0] == 2
    assert await store.list_reminders() == []  # fired once: gone
    await store.send_call(
        "after", AGENT, {"e": 2}, within=5.0, max_attempts=3, expires_in=60.0, owner_key="csv"
    )
    now = fake_clock.now()
    assert await owner_takes(store) == [(None, None), ("once", now), (None, None)]
    assert await owner_takes(store, "json") == [("other-key", now)]


async def test_replace_forget_and_a_refused_payload(store: Store, fake_clock: FakeClock) -> None:
    at = datetime(2031, 1, 1, tzinfo=UTC)
    await remind(store, "flush", at=at)
    await remind(store, "flush", delay=30.0, every=None)  # replaces it
    (reminder,) = await store.list_reminders(AGENT, "csv")
    assert (reminder.next_at, reminder.every, reminder.generation) == (
        fake_clock.now() + timedelta(seconds=30),
        None,
        2,
    )
    with pytest.raises(PayloadError):
        await store.set_reminder(AGENT, "csv", "bad", {1, 2}, within=5.0, attempts=3)
    assert [r.name for r in await store.list_reminders()] == ["flush"]
    assert await store.forget_reminder(AGENT, "csv", "flush") is True
    assert await store.forget_reminder(AGENT, "csv", "flush") is False
    fake_clock.advance(60)
    assert await store.fire_reminders(limit=10) == (0, None)
    assert await store.next_reminder() is None


async def test_concurrent_firings_queue_one_call_per_tick(
    store: Store, fake_clock: FakeClock
) -> None:
    for n in range(5):
        await remind(store, f"r{n}", key=f"k{n}", delay=0)
    fake_clock.advance(0.5)
    fired = await asyncio.gather(*(store.fire_reminders(limit=10) for _ in range(4)))
    assert sum(queued for queued, _ in fired) == 5
    for n in range(5):
        assert len(await owner_takes(store, f"k{n}")) == 1
