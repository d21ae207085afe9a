"""Batched exclusive agents: a key's calls flushed max_items at a time or by the timer,
each caller answered with its own item's result, and a broken batch answering every caller.

The caller's App runs no role, so calls queue until the owner's App starts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, Batch, CallFailedError, PermanentError
from shepherd.core.calls import BATCH_ERROR
from shepherd.errors import ConfigError
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest

PATIENCE = 60.0
AGENT = "events.write"


def make_app(url: str, flushes: list[int], *, max_items: int = 100, mode: str = "ok") -> App:
    app = App(url, poll_interval=0.05, idle_poll_max=0.2, sqlite_synchronous="NORMAL")

    @app.agent(AGENT, exclusive_by="type", batch=Batch(max_items=max_items, max_delay=0.05))
    async def write(requests: list[AgentRequest]) -> Any:
        flushes.append(len(requests))
        if mode == "short":
            return [{"n": r.payload["n"]} for r in requests[1:]]
        if mode == "raise":
            raise PermanentError("the file is read-only")
        return [{"n": r.payload["n"]} for r in requests]

    return app


async def test_a_thousand_queued_calls_of_one_key_make_ten_flushes(store_url: str) -> None:
    flushes: list[int] = []
    caller = make_app(store_url, flushes)
    owner = make_app(store_url, flushes)
    async with caller, owner:
        calls = [
            asyncio.create_task(caller.call(AGENT, {"type": "csv", "n": n}, timeout=PATIENCE))
            for n in range(1000)
        ]

        async def queued() -> bool:
            return (await caller.store.key_backlogs(AGENT)).get("csv", (0,))[0] == 1000

        await wait_until(queued, timeout=PATIENCE, message="the calls were not all queued")
        async with owner.running(["agent"]):
            results = await asyncio.gather(*calls)

    assert flushes == [100] * 10
    assert results == [{"n": n} for n in range(1000)]


async def test_a_lone_call_is_served_by_the_timer(app: App) -> None:
    flushes: list[int] = []

    @app.agent(AGENT, exclusive_by="type", batch=Batch(max_items=100, max_delay=0.05))
    async def write(requests: list[AgentRequest]) -> Any:
        flushes.append(len(requests))
        return [r.payload for r in requests]

    async with app.running(["agent"]):
        assert await app.call(AGENT, {"type": "csv"}, timeout=PATIENCE) == {"type": "csv"}
    assert flushes == [1]


@pytest.mark.parametrize(("mode", "error"), [("short", BATCH_ERROR), ("raise", "PermanentError")])
async def test_a_broken_batch_answers_every_caller_with_the_cause(
    store_url: str, mode: str, error: str
) -> None:
    flushes: list[int] = []
    caller = make_app(store_url, flushes, max_items=5, mode=mode)
    owner = make_app(store_url, flushes, max_items=5, mode=mode)
    async with caller, owner:
        calls = [
            asyncio.create_task(caller.call(AGENT, {"type": "csv", "n": n}, timeout=PATIENCE))
            for n in range(5)
        ]
        await wait_until(
            lambda: _queued(caller, 5), timeout=PATIENCE, message="the calls were not all queued"
        )
        async with owner.running(["agent"]):
            outcomes = await asyncio.gather(*calls, return_exceptions=True)

    assert flushes == [5]
    assert all(isinstance(o, CallFailedError) for o in outcomes)
    for outcome in outcomes:
        assert isinstance(outcome, CallFailedError)
        assert outcome.error["type"] == error
        if mode == "short":
            assert "events.write: the batch handler returned a list of 4 for 5" in str(outcome)


async def _queued(app: App, n: int) -> bool:
    return (await app.store.key_backlogs(AGENT)).get("csv", (0,))[0] == n


def test_bad_batches_are_refused(app: App) -> None:
    with pytest.raises(ConfigError, match="max_items"):
        Batch(max_items=0)
    with pytest.raises(ConfigError, match="max_delay"):
        Batch(max_delay=float("nan"))
    with pytest.raises(ConfigError, match="only an exclusive agent"):
        app.agent("plain", batch=Batch())


async def test_after_a_flush_the_owner_waits_for_the_next_call_not_a_poll(store_url: str) -> None:
    """With the fallback poll an hour away, every call is served by a wake-up: one sent
    while its key's batch is being handled, and one sent once the key is idle again,
    after answers whose transaction found no call waiting."""
    app = App(store_url, poll_interval=3600, idle_poll_max=3600, sqlite_synchronous="NORMAL")
    handling, release = asyncio.Event(), asyncio.Event()
    flushes: list[list[int]] = []

    @app.agent(AGENT, exclusive_by="type", batch=Batch(max_items=100, max_delay=0.01))
    async def write(requests: list[AgentRequest]) -> Any:
        flushes.append([r.payload["n"] for r in requests])
        handling.set()
        await release.wait()
        return [r.payload["n"] for r in requests]

    async with app, app.running(["agent"]):
        first = asyncio.create_task(app.call(AGENT, {"type": "csv", "n": 1}, timeout=PATIENCE))
        await asyncio.wait_for(handling.wait(), PATIENCE)
        second = asyncio.create_task(app.call(AGENT, {"type": "csv", "n": 2}, timeout=PATIENCE))
        await wait_until(
            lambda: _waiting(app, 2), timeout=PATIENCE, message="the second call was not sent"
        )
        release.set()
        assert await first == 1
        assert await second == 2
        assert await app.call(AGENT, {"type": "csv", "n": 3}, timeout=PATIENCE) == 3
    assert flushes == [[1], [2], [3]]


async def _waiting(app: App, calls: int) -> bool:
    return (await app.store.key_backlogs(AGENT)).get("csv", (0,))[0] == calls
