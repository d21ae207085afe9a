"""Reminders through the App: the key's owner receives each tick as a call, in order with the
key's other calls, after its key moved too; replaced and forgotten; bad input refused.

On the FakeClock (`fake_time`): the supervisor's scans and the owners' polls pass when the
test moves it.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App
from shepherd.errors import ConfigError, PayloadError, ShepherdError, UnknownAgentError
from support.backends import sqlite_only
from support.fake_time import clock_of, pass_until

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest

pytestmark = pytest.mark.fake_time

AGENT = "events.write"


def register(app: App, seen: list[tuple[str, Any, int | None]]) -> None:
    """An exclusive agent that notes (reminder or "call", tick or payload, epoch) of each handling."""

    @app.agent(AGENT, exclusive_by="type")
    async def write(request: AgentRequest) -> Any:
        if request.reminder is not None and request.reminder_at is not None:
            seen.append((request.reminder, request.reminder_at, request.owner_epoch))
            assert request.payload == {"flush": True}
            state = request.owner_state if isinstance(request.owner_state, dict) else {}
            ticks = list(state.get("ticks") or [])
            request.owner_state = {"ticks": [*ticks, request.reminder_at.isoformat()]}
        else:
            seen.append(("call", request.payload, request.owner_epoch))
        return "ok"

    @app.agent("plain")
    async def plain(request: AgentRequest) -> None:
        return None


async def test_each_tick_is_one_call_of_the_key_also_after_the_key_moved(app: App) -> None:
    seen: list[tuple[str, Any, int | None]] = []
    register(app, seen)
    clock = clock_of(app)
    async with app.running(["agent", "supervisor"]):
        start = app.store.now()
        await app.remind(AGENT, "csv", "flush", {"flush": True}, every=2.0)

        def ticks() -> list[Any]:
            return [t for what, t, _ in seen if what == "flush"]

        await pass_until(app, lambda: len(ticks()) >= 2, message="the reminder never fired")
        assert ticks()[:2] == [start + timedelta(seconds=2), start + timedelta(seconds=4)]
        # A plain call of the key meanwhile: handled in turn, by the same owner.
        assert await app.call(AGENT, {"type": "csv", "n": 1}) == "ok"

        # The key moves (its lease lost, as far as this process can tell): the next
        # ownership, with a new epoch, gets the ticks.
        (lease,) = await app.store.list_key_leases(AGENT)
        await app.store.release_keys(AGENT, [lease.key], owner=lease.owner)
        epochs = {e for what, _, e in seen if what == "flush"}
        await pass_until(
            app,
            lambda: {e for what, _, e in seen if what == "flush"} - epochs != set(),
            message="the reminder did not fire under the next ownership",
        )

        # Replaced by a one-off, due in 10 s: fires once, then is gone.
        await app.remind(AGENT, "csv", "flush", {"flush": True}, delay=10.0)
        before = len(ticks())
        await pass_until(app, lambda: len(ticks()) > before, message="the one-off never fired")
        assert ticks()[-1] >= clock.now() - timedelta(seconds=2)
        assert await app.reminders() == []
        assert await app.forget(AGENT, "csv", "flush") is False

    # Never twice for one tick: in the answers committed (the owner state), and within
    # each ownership (a handling cut by the move, its answer refused, is the next's).
    (key,) = await app.store.take_keys(AGENT, ["csv"], owner="test", lease=60.0)
    assert isinstance(key.state, dict)
    committed = key.state["ticks"]
    assert isinstance(committed, list)
    every = [t.isoformat() for t in sorted(set(ticks()))]
    assert committed in (every, every[:-1])  # the last answer may be cut by the stop
    for epoch in {e for _, _, e in seen}:
        handled = [t for what, t, e in seen if what == "flush" and e == epoch]
        assert handled == sorted(set(handled)), handled
    assert [what for what, _, _ in seen].count("call") == 1


@sqlite_only()  # refused before the store is touched
@pytest.mark.parametrize(
    ("agent", "kwargs", "error", "message"),
    [
        ("nobody", {}, UnknownAgentError, "unknown agent 'nobody'"),
        ("plain", {}, ConfigError, "agent 'plain' is not exclusive"),
        (AGENT, {"delay": 1, "at": datetime(2030, 1, 1)}, ConfigError, "not both"),
        (AGENT, {"delay": -1}, ConfigError, "delay must be >= 0"),
        (AGENT, {"delay": math.nan}, ConfigError, "delay must be a finite number"),
        (AGENT, {"delay": math.inf}, ConfigError, "delay must be a finite number"),
        (AGENT, {"every": 0}, ConfigError, "every must be > 0"),
        (AGENT, {"every": -2.5}, ConfigError, "every must be > 0"),
        (AGENT, {"every": math.nan}, ConfigError, "every must be a finite number"),
        (AGENT, {"every": math.inf}, ConfigError, "every must be a finite number"),
        (AGENT, {"every": 10**400}, ConfigError, "every must be a finite number"),
        (AGENT, {"at": datetime(2030, 1, 1)}, ConfigError, "at must be an aware datetime"),
        (AGENT, {"payload": {1, 2}}, PayloadError, "JSON"),
        (AGENT, {"name": "n" * 201}, ConfigError, "the reminder's name is 201 bytes"),
        (AGENT, {"name": ""}, ConfigError, "name must be a non-empty str"),
        (AGENT, {"key": ""}, ConfigError, "the key must be a non-empty str"),
    ],
)
async def test_bad_reminders_are_refused_naming_the_problem_and_nothing_is_stored(
    app: App, agent: str, kwargs: dict[str, Any], error: type[ShepherdError], message: str
) -> None:
    register(app, [])
    args = {"key": "csv", "name": "flush", "payload": None, **kwargs}
    with pytest.raises(error, match=message):
        await app.remind(
            agent,
            args.pop("key"),
            args.pop("name"),
            args.pop("payload"),
            **args,
        )
    assert await app.reminders() == []
