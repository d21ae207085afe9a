"""A resource seen without a limit is trusted until the map changes or `refresh` passes."""

from __future__ import annotations

from shepherd.governance.unlimited import Unlimited
from shepherd.store import signals as ch
from shepherd.store.signals import Signals
from shepherd.testing import FakeClock


async def test_an_unlimited_resource_is_trusted_for_refresh_seconds() -> None:
    clock = FakeClock()
    unlimited = Unlimited(Signals(), clock=clock, refresh=30.0)
    assert "db" not in unlimited

    unlimited.remember("db")
    clock.advance(30.0)
    assert "db" in unlimited
    clock.advance(0.5)
    assert "db" not in unlimited  # asked again, in case a wake-up was lost


async def test_a_change_of_the_map_forgets_every_resource_and_says_so() -> None:
    signals = Signals()
    changes: list[None] = []
    unlimited = Unlimited(
        signals, clock=FakeClock(), refresh=30.0, on_change=lambda: changes.append(None)
    )
    unlimited.remember("db")
    unlimited.remember("api")

    signals.ring(ch.RESOLVER)

    assert "db" not in unlimited
    assert "api" not in unlimited
    assert changes == [None]
    unlimited.remember("db")
    assert "db" in unlimited  # remembered again after the change
