"""Durable calls (app.call) in the store: taken by one process at a time, handed on, one answer."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.calls import GAVE_UP
from shepherd.core.records import CallAnswer
from shepherd.errors import PayloadError
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

AGENT = "prices.quote"
WITHIN = 5.0


async def send(store: Store, call_id: str, payload: object = None, *, attempts: int = 3) -> None:
    await store.send_call(
        call_id,
        AGENT,
        {"n": call_id} if payload is None else payload,
        within=WITHIN,
        max_attempts=attempts,
        expires_in=60.0,
    )


async def take(store: Store, worker: str, limit: int = 10) -> list[str]:
    taken, _ = await store.take_calls(worker=worker, agents=[AGENT], limit=limit)
    return [c.call_id for c in taken]


async def test_a_call_is_taken_once_oldest_first_and_answered_once(store: Store) -> None:
    wake = store.signals.event(ch.CALLS)
    await send(store, "c1")
    await send(store, "c2")
    assert wake.is_set()

    taken, given_up = await store.take_calls(worker="w1", agents=[AGENT, "other"], limit=1)
    assert given_up == []
    (call,) = taken
    assert (call.call_id, call.agent, call.payload, call.attempt, call.max_attempts) == (
        "c1",
        AGENT,
        {"n": "c1"},
        1,
        3,
    )
    assert call.within == WITHIN
    assert await take(store, "w2") == ["c2"]
    assert await take(store, "w3") == []  # both are being handled
    assert await store.take_calls(worker="w3", agents=["other"], limit=10) == ([], [])

    answers = store.signals.event(ch.ANSWERS)
    assert await store.answer_call("c1", worker="w1", attempt=1, ok=True, body={"price": 3})
    assert answers.is_set()
    # One answer: a second one, or one from another worker, is refused.
    assert not await store.answer_call("c1", worker="w1", attempt=1, ok=True, body={"price": 4})
    assert not await store.answer_call("c2", worker="w1", attempt=1, ok=True, body=1)
    assert await store.get_answers(["c1", "c2", "nope"]) == {
        "c1": CallAnswer(ok=True, body={"price": 3})
    }


async def test_a_handling_that_overruns_is_handed_on_and_only_the_latest_answers(
    store: Store, fake_clock: FakeClock
) -> None:
    await send(store, "c1")
    assert await take(store, "w1") == ["c1"]
    fake_clock.advance(WITHIN + 0.1)

    (call,), _ = await store.take_calls(worker="w2", agents=[AGENT], limit=10)
    assert (call.call_id, call.attempt) == ("c1", 2)
    # The first handling's late answer is refused: the caller gets the second's.
    assert not await store.answer_call("c1", worker="w1", attempt=1, ok=True, body="late")
    assert await store.answer_call("c1", worker="w2", attempt=2, ok=True, body="fresh")
    assert await store.get_answers(["c1"]) == {"c1": CallAnswer(ok=True, body="fresh")}
    fake_clock.advance(WITHIN + 0.1)
    assert await take(store, "w3") == []  # answered calls are never taken again


async def test_a_call_whose_handlings_never_answer_is_given_up_with_an_error(
    store: Store, fake_clock: FakeClock
) -> None:
    await send(store, "poison", attempts=2)
    for worker in ("w1", "w2"):
        assert await take(store, worker) == ["poison"]
        fake_clock.advance(WITHIN + 0.1)

    await send(store, "fine")
    taken, given_up = await store.take_calls(worker="w3", agents=[AGENT], limit=10)
    # The poison call no longer blocks the one behind it.
    assert [c.call_id for c in taken] == ["fine"]
    assert [(c.call_id, c.attempt) for c in given_up] == [("poison", 2)]
    answer = (await store.get_answers(["poison"]))["poison"]
    assert not answer.ok
    assert isinstance(answer.body, dict)
    assert answer.body["type"] == GAVE_UP
    assert "2 times" in str(answer.body["message"])
    assert not await store.answer_call("poison", worker="w2", attempt=2, ok=True, body=1)


async def test_an_error_answer_is_stored_as_the_error(store: Store) -> None:
    await send(store, "c1")
    await take(store, "w1")
    error = {"type": "PermanentError", "message": "no such product"}
    assert await store.answer_call("c1", worker="w1", attempt=1, ok=False, body=error)
    assert await store.get_answers(["c1"]) == {"c1": CallAnswer(ok=False, body=error)}


async def test_a_payload_that_is_not_json_is_refused_and_nothing_is_stored(store: Store) -> None:
    with pytest.raises(PayloadError):
        await send(store, "bad", {"x": object()})
    assert await take(store, "w1") == []


async def test_expired_calls_are_purged_answered_or_not(
    store: Store, fake_clock: FakeClock
) -> None:
    await send(store, "c1")
    await send(store, "c2")
    await take(store, "w1", limit=1)
    await store.answer_call("c1", worker="w1", attempt=1, ok=True, body=1)
    assert await store.purge_calls(limit=10) == 0

    fake_clock.advance(61.0)
    assert await store.purge_calls(limit=1) == 1
    assert await store.purge_calls(limit=10) == 1
    assert await store.get_answers(["c1"]) == {}
    assert await take(store, "w1") == []


async def test_many_processes_taking_at_once_take_each_call_once(stores: Stores) -> None:
    processes = [await stores.connect() for _ in range(4)]
    for n in range(20):
        await send(processes[0], f"c{n}")

    taken = await asyncio.gather(*(take(p, f"w{i}", limit=8) for i, p in enumerate(processes)))

    every = [call_id for calls in taken for call_id in calls]
    assert sorted(every) == sorted(f"c{n}" for n in range(20))
