"""The pure parts of an ownership's life cycle: the pause after failed acquires, idling."""

from __future__ import annotations

from shepherd.governance.lifecycle import MAX_PAUSE, Ownership, acquire_pause


def test_the_pause_after_failed_acquires_doubles_from_the_poll_interval_up_to_a_cap() -> None:
    assert [acquire_pause(n, 0.5) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]
    assert acquire_pause(40, 0.5) == MAX_PAUSE


def test_an_ownership_is_idle_owner_idle_seconds_after_its_last_handling() -> None:
    own = Ownership(agent="a", key="k", epoch=1, state=None, active_at=100.0)
    assert own.idle_left(None, 1e9) is None  # no owner_idle: never idle
    assert own.idle_left(5.0, 103.0) == 2.0
    assert own.idle_left(5.0, 105.0) == 0.0
