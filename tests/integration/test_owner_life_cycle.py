"""Owners with a life cycle: `on_acquire` before an ownership's first handling, `on_release`
when it ends (idle, moved, the roles stopping), each once per ownership; an `on_acquire`
that raises hands the key back and alerts after repeated failures; bad options refused.

On the FakeClock (`fake_time`): idling, renewals and pauses pass when the test moves it.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App
from shepherd.errors import ConfigError
from shepherd.testing import wait_until
from support.backends import sqlite_only
from support.fake_time import pass_until

if TYPE_CHECKING:
    from shepherd import Alert
    from shepherd.agents import AgentRequest
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

AGENT = "events.write"


class Seen:
    """What the hooks and the handler saw, in order: (what, key, state or epoch)."""

    def __init__(self, *, failures: int = 0) -> None:
        self.events: list[tuple[str, str, Any]] = []
        #: How many of the first `on_acquire` calls raise.
        self.failures = failures

    def of(self, what: str, key: str) -> list[Any]:
        return [x for w, k, x in self.events if (w, k) == (what, key)]

    def alternate(self, key: str) -> bool:
        """Whether the key's acquires and releases alternate, handlings only in between."""
        owned = False
        for what, k, _ in self.events:
            if k != key or what == "acquire failed":
                continue
            if what == "handle" and not owned:
                return False
            if what in ("acquire", "release"):
                if owned is (what == "acquire"):
                    return False
                owned = what == "acquire"
        return True


def register(app: App, seen: Seen, *, idle: float | None = None) -> None:
    async def acquire(key: str, state: JsonValue) -> None:
        if seen.failures > 0:
            seen.failures -= 1
            seen.events.append(("acquire failed", key, state))
            raise RuntimeError("the disk is not mounted")
        seen.events.append(("acquire", key, state))

    def release(key: str, state: JsonValue) -> None:  # a plain def: run in a thread
        seen.events.append(("release", key, state))

    @app.agent(AGENT, exclusive_by="type", on_acquire=acquire, on_release=release, owner_idle=idle)
    async def write(request: AgentRequest) -> Any:
        key = str(request.owner_key)
        seen.events.append(("handle", key, request.owner_epoch))
        state = request.owner_state if isinstance(request.owner_state, dict) else {"count": 0}
        request.owner_state = {"count": int(state["count"]) + 1}
        return request.owner_state["count"]


async def test_an_idle_owner_releases_its_key_and_the_next_call_acquires_it_again(
    app: App,
) -> None:
    seen = Seen()
    register(app, seen, idle=5.0)
    async with app.running(["agent"]):
        assert [await app.call(AGENT, {"type": key}) for key in ("a", "b", "a")] == [1, 1, 2]
        assert seen.of("acquire", "a") == [None]
        assert seen.of("acquire", "b") == [None]
        assert seen.of("release", "a") == []

        await pass_until(
            app,
            lambda: len(seen.of("release", "a")) == len(seen.of("release", "b")) == 1,
            message="the idle keys were not released",
        )
        assert seen.of("release", "a") == [{"count": 2}]
        assert seen.of("release", "b") == [{"count": 1}]

        async def handed_back() -> bool:
            return await app.store.list_key_leases(AGENT) == []

        await wait_until(handed_back, message="the idle keys were not handed back")

        assert await app.call(AGENT, {"type": "a"}) == 3
        assert seen.of("acquire", "a") == [None, {"count": 2}]
        assert seen.of("handle", "a") == [1, 1, 2]  # the epochs: a new ownership
    assert seen.of("release", "a") == [{"count": 2}, {"count": 3}]  # the roles stopped
    assert seen.of("release", "b") == [{"count": 1}]
    assert seen.alternate("a")
    assert seen.alternate("b")


async def test_a_moved_key_is_released_once_and_a_stopping_process_releases_its_keys(
    app: App,
) -> None:
    seen = Seen()
    register(app, seen)
    async with app.running(["agent"]):
        assert await app.call(AGENT, {"type": "a"}) == 1
        assert await app.call(AGENT, {"type": "b"}) == 1
        (lease, _) = await app.store.list_key_leases(AGENT)
        # Another owner's take, as far as this one can tell: its renewal finds the key gone.
        await app.store.release_keys(AGENT, [lease.key], owner=lease.owner)

        await pass_until(
            app, lambda: seen.of("release", "a") != [], message="the moved key was not released"
        )
        assert seen.of("release", "a") == [{"count": 1}]
        assert seen.of("release", "b") == []
        assert await app.call(AGENT, {"type": "a"}) == 2
        assert seen.of("acquire", "a") == [None, {"count": 1}]
    assert seen.of("release", "a") == [{"count": 1}, {"count": 2}]
    assert seen.of("release", "b") == [{"count": 1}]
    assert seen.alternate("a")
    assert seen.alternate("b")


async def test_an_acquire_that_raises_hands_the_key_back_and_alerts_after_three_failures(
    app: App, alerts: list[Alert]
) -> None:
    seen = Seen(failures=3)
    register(app, seen)
    async with app.running(["agent"]):
        call = asyncio.ensure_future(app.call(AGENT, {"type": "a"}))
        await pass_until(app, call.done, message="the call was never handled")
        assert call.result() == 1
    assert [w for w, _, _ in seen.events] == [
        "acquire failed",
        "acquire failed",
        "acquire failed",
        "acquire",
        "handle",
        "release",
    ]
    (alert,) = [a for a in alerts if a.workflow == f"owner:{AGENT}"]
    assert alert.key == "a"
    assert alert.failure_count == 3
    assert f"{AGENT}: on_acquire of key 'a' failed 3 times in a row" in alert.reason
    assert "RuntimeError: the disk is not mounted" in alert.reason


@sqlite_only()  # refused before the store is touched
@pytest.mark.parametrize("idle", [0, -1.0, math.nan, math.inf, True, "5"])
async def test_a_bad_owner_idle_is_refused_naming_the_agent(app: App, idle: Any) -> None:
    async def write(request: AgentRequest) -> None:
        return None

    with pytest.raises(ConfigError, match=rf"'owner_idle': agent '{AGENT}': must be a positive"):
        app.agent(AGENT, exclusive_by="type", owner_idle=idle)(write)
    assert AGENT not in app.agents


@sqlite_only()  # refused before the store is touched
async def test_hooks_only_for_exclusive_agents_and_only_functions(app: App) -> None:
    async def write(request: AgentRequest) -> None:
        return None

    with pytest.raises(ConfigError, match=r"'on_acquire': agent 'plain': only an exclusive"):
        app.agent("plain", on_acquire=lambda key, state: None)(write)
    with pytest.raises(ConfigError, match=r"'owner_idle': agent 'plain': only an exclusive"):
        app.agent("plain", owner_idle=5.0)(write)
    with pytest.raises(ConfigError, match=r"'on_release': agent 'w': must be a function"):
        app.agent("w", exclusive_by="type", on_release="close")(write)  # type: ignore[arg-type]
    assert app.agents == {}
