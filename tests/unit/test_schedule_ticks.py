"""Which ticks a schedule fires (`core.schedules.due_ticks`): on time, missed, caught up.

Pure decisions on instants passed in; the cron ticks are `cronsim`'s in a real
time zone (the system's or `tzdata`'s), so the daylight-saving days are the
real ones.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from shepherd.core.schedules import CatchUp, EveryTicks, Schedule, due_ticks, tick_key
from shepherd.errors import ConfigError
from shepherd.store.schedule_rows import checked_schedule, ticks_of

T0 = datetime(2030, 1, 1, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_every_ticks_are_whole_multiples_since_the_epoch() -> None:
    ticks = EveryTicks(1.0)
    assert ticks.after(at(0)) == at(1)
    assert ticks.after(at(0.5)) == at(1)
    assert ticks.before(at(1)) == at(0)
    assert ticks.before(at(1.5)) == at(1)
    assert EveryTicks(0.1).after(at(0.25)) == at(0.3)


def test_on_time_ticks_fire_and_missed_ones_follow_the_policy() -> None:
    ticks = EveryTicks(1.0)
    # Last tick fired at 2; every process stopped until 8.1; grace 1 s:
    # ticks 3..7 were missed, tick 8 is on time.
    fired = {
        policy: due_ticks(
            ticks, since=at(2), now=at(8.1), catch_up=policy, max_catch_up=10, grace=1.0
        )
        for policy in CatchUp
    }
    assert fired[CatchUp.SKIP].ticks == (at(8),)
    assert fired[CatchUp.LATEST].ticks == (at(7), at(8))
    assert fired[CatchUp.ALL].ticks == tuple(at(s) for s in range(3, 9))
    assert {f.missed for f in fired.values()} == {5}
    assert {f.last for f in fired.values()} == {at(8)}
    capped = due_ticks(
        ticks, since=at(2), now=at(8.1), catch_up=CatchUp.ALL, max_catch_up=3, grace=1.0
    )
    assert capped.ticks == (at(5), at(6), at(7), at(8))


def test_a_look_between_ticks_fires_nothing() -> None:
    firing = due_ticks(
        EveryTicks(1.0), since=at(3), now=at(3.9), catch_up=CatchUp.ALL, max_catch_up=5, grace=1
    )
    assert firing.ticks == ()
    assert firing.last is None


def _berlin_days(first: datetime, days: int) -> list[datetime]:
    """The ticks of a daily 02:30 Europe/Berlin schedule looked at every 10 minutes."""
    schedule = checked_schedule(
        Schedule(name="nightly", workflow="w", cron="30 2 * * *", timezone="Europe/Berlin")
    )
    ticks = ticks_of(schedule)
    since = first
    fired: list[datetime] = []
    now = first
    while now < first + timedelta(days=days):
        now += timedelta(minutes=10)
        firing = due_ticks(
            ticks, since=since, now=now, catch_up=CatchUp.SKIP, max_catch_up=1, grace=60
        )
        fired.extend(firing.ticks)
        since = firing.last or since
    return fired


@pytest.mark.parametrize(
    ("day", "local"),
    [
        # Spring forward: 02:00-03:00 does not exist; it fires once, at 03:00 CEST.
        (datetime(2026, 3, 29, tzinfo=BERLIN), [(2, 30), (3, 0), (2, 30)]),
        # Fall back: 02:00-03:00 happens twice; it fires once, at the first 02:30.
        (datetime(2026, 10, 25, tzinfo=BERLIN), [(2, 30), (2, 30), (2, 30)]),
    ],
)
def test_a_daily_berlin_schedule_fires_once_on_each_dst_change_day(
    day: datetime, local: list[tuple[int, int]]
) -> None:
    fired = _berlin_days(day - timedelta(days=1), 3)
    dates = [t.astimezone(BERLIN).date() for t in fired]
    assert dates == [(day + timedelta(days=d - 1)).date() for d in range(3)]
    assert [(t.astimezone(BERLIN).hour, t.astimezone(BERLIN).minute) for t in fired] == local
    assert len(set(fired)) == 3


def test_a_tick_key_names_the_schedule_and_the_instant() -> None:
    assert tick_key("nightly", at(1)) == "schedule:nightly@2030-01-01T00:00:01+00:00"


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"cron": "61 * * * *"}, "cron", "is not a cron expression"),
        ({"cron": "every day"}, "cron", "is not a cron expression"),
        ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "timezone", "unknown timezone"),
        ({"cron": "0 2 * * *", "every": 60}, "cron", "exactly one of cron and every"),
        ({}, "cron", "exactly one of cron and every"),
        ({"every": 0}, "every", "more than 0"),
        ({"every": -1}, "every", "more than 0"),
        ({"every": math.nan}, "every", "finite"),
        ({"every": math.inf}, "every", "finite"),
        ({"every": 10**400}, "every", "at most"),
        ({"every": "5"}, "every", "number of seconds"),
        ({"every": 1, "catch_up": "sometimes"}, "catch_up", "'skip', 'latest', 'all'"),
        ({"every": 1, "max_catch_up": 0}, "max_catch_up", "from 1 to"),
        ({"every": 1, "max_catch_up": 2.5}, "max_catch_up", "whole number"),
    ],
)
def test_a_bad_schedule_is_refused_naming_the_problem(
    fields: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        checked_schedule(Schedule(name="s", workflow="w", **fields))  # type: ignore[arg-type]
    assert caught.value.field == field
    assert "schedule 's'" in str(caught.value)
    assert words in str(caught.value)
