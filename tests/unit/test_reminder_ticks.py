"""The core's reminder decisions: when one is first due, which tick a firing queues, its call id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shepherd.core.reminders import Firing, Reminder, checked_timing, fire, tick_call_id

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def reminder(every: float | None, *, generation: int = 1) -> Reminder:
    return Reminder(
        agent="a", key="k", name="n", payload=None, next_at=T0, every=every, generation=generation
    )


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_firing_queues_the_latest_tick_due_and_moves_past_now() -> None:
    assert fire(reminder(2.0), now=at(-0.1)) is None
    assert fire(reminder(2.0), now=T0) == Firing(tick=T0, next_at=at(2))
    assert fire(reminder(2.0), now=at(7.5)) == Firing(tick=at(6), next_at=at(8))
    assert fire(reminder(0.1), now=at(0.3)) == Firing(tick=at(0.3), next_at=at(0.4))
    assert fire(reminder(None), now=at(100)) == Firing(tick=T0, next_at=None)


def test_neither_delay_nor_at_is_one_period_for_a_periodic_reminder_and_now_for_a_one_off() -> None:
    assert checked_timing(every=5) == checked_timing(delay=5.0, every=5.0)
    assert checked_timing().delay == 0.0
    east = datetime(2030, 1, 1, 3, tzinfo=timezone(timedelta(hours=3)))
    assert checked_timing(at=east).at == T0


def test_a_ticks_call_id_names_the_reminder_its_generation_and_the_tick() -> None:
    one = tick_call_id("a", "k", "n", 1, T0)
    assert one == tick_call_id("a", "k", "n", 1, T0.astimezone(timezone(timedelta(hours=2))))
    others = {
        tick_call_id("a", "k", "n", 2, T0),
        tick_call_id("a", "k", "n", 1, at(1)),
        tick_call_id("a", "k2", "n", 1, T0),
        tick_call_id("a", "k", "n2", 1, T0),
    }
    assert one not in others
    assert len(others) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay": 1, "at": T0}, "not both"),
        ({"every": True}, "every must be a number"),
        ({"every": "5"}, "every must be a number"),
        ({"delay": "5"}, "delay must be a number"),
        ({"at": "2030-01-01"}, "at must be a datetime"),
    ],
)
def test_refused_timing_names_the_value(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        checked_timing(**kwargs)
