"""Schedules in the store: declared once, added, replaced, listed, advanced; bad input writes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core.schedules import CatchUp, Schedule
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

NIGHTLY = Schedule(
    name="nightly",
    workflow="report",
    cron="30 2 * * *",
    timezone="Europe/Berlin",
    data={"kind": "daily", "n": [1, 2]},
    catch_up=CatchUp.LATEST,
)


async def test_a_declared_schedule_is_stored_once_and_an_operators_change_stays(
    store: Store, fake_clock: FakeClock
) -> None:
    assert await store.declare_schedule(NIGHTLY) is True
    created = fake_clock.now()
    (stored,) = await store.list_schedules()
    assert stored.schedule == NIGHTLY
    assert stored.created_at == stored.since == created
    assert stored.last_tick is None

    fake_clock.advance(5)
    paused = Schedule(name="nightly", workflow="report", every=60.0, paused=True)
    assert (await store.replace_schedule(paused)).schedule == paused
    # The code's declaration again (an app opening) overwrites nothing.
    assert await store.declare_schedule(NIGHTLY) is False
    assert [s.schedule for s in await store.list_schedules()] == [paused]

    fake_clock.advance(5)
    resumed = await store.replace_schedule(Schedule(name="nightly", workflow="report", every=60.0))
    assert resumed.since == fake_clock.now()  # the pause's ticks are not caught up


async def test_add_refuses_a_taken_name_and_replace_an_unknown_one(store: Store) -> None:
    await store.add_schedule(NIGHTLY)
    with pytest.raises(ConfigError, match="'nightly' exists already"):
        await store.add_schedule(Schedule(name="nightly", workflow="other", every=1))
    with pytest.raises(ConfigError, match="unknown schedule 'weekly'"):
        await store.replace_schedule(Schedule(name="weekly", workflow="report", every=1))
    assert [s.schedule for s in await store.list_schedules()] == [NIGHTLY]


async def test_advance_moves_forward_only(store: Store, fake_clock: FakeClock) -> None:
    await store.add_schedule(Schedule(name="tick", workflow="w", every=1))
    start = fake_clock.now()
    assert await store.advance_schedule("tick", start + timedelta(seconds=2)) is True
    assert await store.advance_schedule("tick", start + timedelta(seconds=1)) is False
    assert await store.advance_schedule("nothing", start + timedelta(seconds=9)) is False
    (stored,) = await store.list_schedules()
    assert stored.since == stored.last_tick == start + timedelta(seconds=2)


@pytest.mark.parametrize(
    "bad",
    [
        Schedule(name="s", workflow="w", cron="not cron"),
        Schedule(name="s", workflow="w", cron="0 2 * * *", timezone="Nowhere/Else"),
        Schedule(name="s", workflow="w"),
        Schedule(name="s", workflow="w", every=float("nan")),
        Schedule(name=" s", workflow="w", every=1),
    ],
)
async def test_a_bad_schedule_writes_nothing(store: Store, bad: Schedule) -> None:
    with pytest.raises(ConfigError):
        await store.add_schedule(bad)
    with pytest.raises(ConfigError):
        await store.declare_schedule(bad)
    assert await store.list_schedules() == []
