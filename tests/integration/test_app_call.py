"""`app.call`: a durable call from plain code, answered once, handed on when a handling dies.

The tests whose handlings outlive their windows run on a FakeClock (`fake_time`)
and move it while the caller waits (the caller's own `timeout` is real time).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd import Alert, App, CallFailedError, PermanentError
from shepherd.core.calls import GAVE_UP
from shepherd.errors import ConfigError, PayloadError, UnknownAgentError
from shepherd.testing import wait_until
from support.backends import sqlite_only
from support.fake_time import WINDOW, pass_until

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest

PATIENCE = 30.0


async def test_a_call_returns_its_handlers_result(app: App) -> None:
    seen: list[tuple[object, int, str]] = []

    @app.agent("prices.quote")
    async def quote(request: AgentRequest) -> dict[str, object]:
        seen.append((request.payload, request.attempt, request.idempotency_key))
        return {"sku": request.payload, "price": 3}

    async with app.running():
        assert await app.call("prices.quote", "A-1", timeout=PATIENCE) == {"sku": "A-1", "price": 3}
        results = await asyncio.gather(
            *(app.call("prices.quote", f"B-{n}", timeout=PATIENCE) for n in range(40))
        )
    assert [r["sku"] for r in results] == [f"B-{n}" for n in range(40)]
    assert len(seen) == 41
    assert len({key for _, _, key in seen}) == 41  # each call its own idempotency key
    assert {attempt for _, attempt, _ in seen} == {1}


async def test_a_permanent_error_is_raised_to_the_caller(app: App) -> None:
    @app.agent("prices.quote")
    async def quote(request: AgentRequest) -> None:
        raise PermanentError(f"no product {request.payload}")

    async with app.running():
        with pytest.raises(CallFailedError, match="no product A-1") as caught:
            await app.call("prices.quote", "A-1", timeout=PATIENCE)
    assert caught.value.agent == "prices.quote"
    assert caught.value.error["type"] == "PermanentError"


@pytest.mark.fake_time
async def test_a_handling_that_never_answers_is_handed_to_another(app: App) -> None:
    attempts: list[int] = []
    never = asyncio.Event()

    @app.agent("slow.service")
    async def slow(request: AgentRequest) -> str:
        attempts.append(request.attempt)
        if request.attempt == 1:
            await never.wait()  # stands for a handler whose process died
        return f"answered by handling {request.attempt}"

    async with app.running():
        call = asyncio.ensure_future(app.call("slow.service", {}, within=WINDOW, timeout=PATIENCE))
        await wait_until(lambda: attempts == [1], timeout=PATIENCE)
        await pass_until(app, call.done)
        answer = await call
    assert answer == "answered by handling 2"
    assert attempts == [1, 2]


@pytest.mark.fake_time
async def test_a_call_that_is_never_answered_is_given_up_and_alerted(
    app: App, alerts: list[Alert]
) -> None:
    @app.agent("poison.pill")
    async def poison(request: AgentRequest) -> None:
        await asyncio.Event().wait()

    async with app.running():
        call = asyncio.ensure_future(
            app.call("poison.pill", {}, within=WINDOW, attempts=2, timeout=PATIENCE)
        )
        await pass_until(app, call.done)
        with pytest.raises(CallFailedError, match=GAVE_UP) as caught:
            await call
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert")
    assert "2 times" in caught.value.error["message"]
    (alert,) = alerts
    assert alert.task_id == caught.value.call_id
    assert alert.workflow == "call:poison.pill"
    assert "given up after 2 handlings" in alert.reason


async def test_the_caller_times_out_while_the_call_may_still_run(app: App) -> None:
    started = asyncio.Event()

    @app.agent("slow.service")
    async def slow(request: AgentRequest) -> None:
        started.set()
        await asyncio.Event().wait()

    async with app.running():
        with pytest.raises(TimeoutError):
            await app.call("slow.service", {}, within=30.0, timeout=0.5)
        assert started.is_set()


@sqlite_only()  # refused before the store is touched
async def test_bad_calls_are_refused_before_anything_is_sent(app: App) -> None:
    calls: list[object] = []

    @app.agent("prices.quote")
    async def quote(request: AgentRequest) -> None:
        calls.append(request.payload)

    async with app.running():
        with pytest.raises(UnknownAgentError, match=r"'prices\.quot'"):
            await app.call("prices.quot", {})
        with pytest.raises(PayloadError):
            await app.call("prices.quote", {"x": {1, 2}})
        for bad in ({"within": 0}, {"attempts": 0}, {"timeout": -1.0}):
            with pytest.raises(ConfigError):
                await app.call("prices.quote", {}, **bad)
        assert await app.call("prices.quote", "ok", timeout=PATIENCE) is None
    assert calls == ["ok"]
