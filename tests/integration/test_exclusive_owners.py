"""Exclusive agents: one owner per key across processes, calls of a key one at a time in order,
keys shared out fairly, durable owner state, and bad keys refused.

Several Apps on one store stand for several processes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, OwnerKeyError
from shepherd.errors import ConfigError
from shepherd.testing import wait_until
from support.backends import sqlite_only

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.store.contract import Store

PATIENCE = 60.0
AGENT = "events.write"
TYPES = [f"type-{n}" for n in range(8)]


class Log:
    """What every process's handlers did, for the assertions."""

    def __init__(self) -> None:
        self.handled: dict[str, list[int]] = defaultdict(list)
        self.in_flight: dict[str, int] = defaultdict(int)
        self.most_at_once = 0
        self.epochs: set[tuple[str, int]] = set()


def make_app(url: str, log: Log, name: str) -> App:
    app = App(url, poll_interval=0.05, idle_poll_max=0.2, sqlite_synchronous="NORMAL")

    @app.agent(AGENT, exclusive_by="type")
    async def write(request: AgentRequest) -> Any:
        key = str(request.owner_key)
        log.in_flight[key] += 1
        log.most_at_once = max(log.most_at_once, log.in_flight[key])
        await asyncio.sleep(0)  # let any other handler of the key run now, if one could
        payload = request.payload
        assert isinstance(payload, dict)
        log.handled[key].append(int(payload["n"]))
        assert request.owner_epoch is not None
        log.epochs.add((key, request.owner_epoch))
        state = request.owner_state if isinstance(request.owner_state, dict) else {"count": 0}
        request.owner_state = {"count": int(state["count"]) + 1, "by": name}
        log.in_flight[key] -= 1
        return {"written": payload["n"], "by": name}

    return app


@contextlib.asynccontextmanager
async def running(apps: list[App]) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        for app in apps:
            await stack.enter_async_context(app)
            await stack.enter_async_context(app.running(["agent"]))
        yield


async def owners(store: Store) -> dict[str, list[str]]:
    now = store.now()
    out: dict[str, list[str]] = defaultdict(list)
    for lease in await store.list_key_leases(AGENT):
        if lease.live(now):
            out[lease.owner].append(lease.key)
    return out


async def test_calls_of_a_key_run_one_at_a_time_in_order_and_keys_spread(store_url: str) -> None:
    log = Log()
    workers = [make_app(store_url, log, name) for name in ("a", "b", "c")]
    caller = make_app(store_url, log, "caller")
    async with running(workers), caller:
        # Every worker is registered before the first call, so keys are shared out at once.
        await wait_until(
            lambda: _registered(caller, 3), timeout=PATIENCE, message="workers not registered"
        )
        calls = [
            caller.call(AGENT, {"type": t, "n": n}, timeout=PATIENCE)
            for n in range(10)
            for t in TYPES
        ]
        results = await asyncio.gather(*calls)
        await wait_until(
            lambda: _all_owned(caller.store), timeout=PATIENCE, message="keys not shared out"
        )
        held = await owners(caller.store)

    assert len(results) == 80
    assert log.most_at_once == 1
    assert dict(log.handled) == {t: list(range(10)) for t in TYPES}
    assert all(len(keys) <= 3 for keys in held.values()), held
    assert {r["written"] for r in results} == set(range(10))


async def _registered(app: App, n: int) -> bool:
    return len([w for w in await app.store.list_workers() if AGENT in w.agents]) >= n


async def _all_owned(store: Store) -> bool:
    held = await owners(store)
    return sum(len(k) for k in held.values()) == 8 and all(len(k) <= 3 for k in held.values())


async def test_the_owner_state_is_committed_with_the_answers_and_read_by_the_next_owner(
    store_url: str,
) -> None:
    log = Log()
    first = make_app(store_url, log, "first")
    async with first, first.running(["agent"]):
        for n in range(3):
            await first.call(AGENT, {"type": "csv", "n": n}, timeout=PATIENCE)
    # The first process stopped and handed its key back; the next owner reads its state.
    second = make_app(store_url, log, "second")
    async with second, second.running(["agent"]):
        reply = await second.call(AGENT, {"type": "csv", "n": 3}, timeout=PATIENCE)
        (lease,) = await second.store.list_key_leases(AGENT)
        (taken,) = await second.store.take_keys(AGENT, ["csv"], owner=lease.owner, lease=10.0)
    assert reply == {"written": 3, "by": "second"}
    assert taken.state == {"count": 4, "by": "second"}
    assert sorted(epoch for key, epoch in log.epochs) == [1, 2]


@sqlite_only()  # refused before the store is touched
async def test_bad_keys_are_refused_naming_the_agent_and_nothing_is_sent(app: App) -> None:
    handled: list[object] = []

    @app.agent(AGENT, exclusive_by="type")
    async def write(request: AgentRequest) -> None:
        handled.append(request.payload)

    def broken(payload: object) -> str:
        raise KeyError("kind")

    @app.agent("by.function", exclusive_by=broken)
    async def other(request: AgentRequest) -> None:
        handled.append(request.payload)

    @app.agent("by.number", exclusive_by=lambda payload: 7)
    async def number(request: AgentRequest) -> None:
        handled.append(request.payload)

    async with app.running(["agent"]):
        for payload, problem in [
            ([1, 2], "must be a JSON object"),
            ({"n": 1}, "no 'type' field"),
            ({"type": ""}, "non-empty string"),
            ({"type": 3}, "non-empty string"),
        ]:
            with pytest.raises(OwnerKeyError, match=problem) as caught:
                await app.call(AGENT, payload)
            assert caught.value.agent == AGENT
        with pytest.raises(OwnerKeyError, match="key function raised KeyError"):
            await app.call("by.function", {})
        with pytest.raises(OwnerKeyError, match="not 7"):
            await app.call("by.number", {})
        assert await app.store.waiting_keys(AGENT) == []
        assert await app.call(AGENT, {"type": "ok"}, timeout=PATIENCE) is None
    assert handled == [{"type": "ok"}]
    with pytest.raises(ConfigError, match="exclusive_by"):
        app.agent("bad", exclusive_by="")
