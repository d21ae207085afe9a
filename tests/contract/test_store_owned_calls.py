"""Calls of an exclusive agent: only a key's owner takes them, in order; a stale owner's answers never land."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.calls import GAVE_UP
from shepherd.core.records import CallAnswer

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

AGENT = "events.write"
LEASE = 10.0
WITHIN = 5.0


async def send(store: Store, call_id: str, key: str, *, attempts: int = 3) -> None:
    await store.send_call(
        call_id,
        AGENT,
        {"event": call_id},
        within=WITHIN,
        max_attempts=attempts,
        expires_in=600.0,
        owner_key=key,
    )


async def own(store: Store, key: str, owner: str) -> int:
    (taken,) = await store.take_keys(AGENT, [key], owner=owner, lease=LEASE)
    return taken.lease.epoch


async def next_calls(store: Store, key: str, owner: str, epoch: int, limit: int = 1) -> list[str]:
    taken, _ = await store.take_key_calls(AGENT, key, owner=owner, epoch=epoch, limit=limit)
    return [c.call_id for c in taken]


async def test_only_the_owner_takes_a_keys_calls_in_the_order_sent(store: Store) -> None:
    for n in range(3):
        await send(store, f"csv-{n}", "csv")
    await send(store, "json-0", "json")
    # Calls with a key are never taken as plain calls.
    assert await store.take_calls(worker="w", agents=[AGENT], limit=10) == ([], [])
    assert await store.waiting_keys(AGENT) == ["csv", "json"]

    epoch = await own(store, "csv", "p1")
    assert await next_calls(store, "csv", "p2", epoch) == []  # not p2's key
    assert await next_calls(store, "csv", "p1", epoch + 1) == []  # not that epoch
    assert await next_calls(store, "csv", "p1", epoch) == ["csv-0"]
    (call,), _ = await store.take_key_calls(AGENT, "csv", owner="p1", epoch=epoch, limit=1)
    # The head again, until it is answered: one at a time, in order.
    assert (call.call_id, call.attempt, call.owner_key) == ("csv-0", 2, "csv")

    assert await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=epoch, answers=[("csv-0", 2, True, {"offset": 10})]
    )
    assert await next_calls(store, "csv", "p1", epoch, limit=5) == ["csv-1", "csv-2"]
    assert await store.get_answers(["csv-0"]) == {"csv-0": CallAnswer(ok=True, body={"offset": 10})}


async def test_answers_and_state_commit_together_for_the_owner(store: Store) -> None:
    await send(store, "a", "csv")
    await send(store, "b", "csv")
    epoch = await own(store, "csv", "p1")
    await next_calls(store, "csv", "p1", epoch, limit=2)

    assert await store.answer_owned(
        AGENT,
        "csv",
        owner="p1",
        epoch=epoch,
        answers=[("a", 1, True, 1), ("b", 1, False, {"type": "PermanentError", "message": "x"})],
        state={"offset": 2},
    )
    answers = await store.get_answers(["a", "b"])
    assert answers["a"] == CallAnswer(ok=True, body=1)
    assert not answers["b"].ok
    await store.release_keys(AGENT, ["csv"], owner="p1")
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p2", lease=LEASE)
    assert taken.state == {"offset": 2}


async def test_a_stale_owners_answers_and_state_are_refused(
    store: Store, fake_clock: FakeClock
) -> None:
    await send(store, "a", "csv")
    old = await own(store, "csv", "p1")
    assert await next_calls(store, "csv", "p1", old) == ["a"]
    fake_clock.advance(LEASE + 1)  # p1 is paused past its lease; p2 takes the key over
    new = await own(store, "csv", "p2")
    assert new == old + 1
    assert await next_calls(store, "csv", "p2", new) == ["a"]

    # p1 wakes up and writes what it had: nothing lands, neither answer nor state.
    stale = await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=old, answers=[("a", 1, True, "stale")], state={"o": 1}
    )
    assert not stale
    assert await store.get_answers(["a"]) == {}
    assert await store.answer_owned(
        AGENT, "csv", owner="p2", epoch=new, answers=[("a", 2, True, "fresh")], state={"o": 2}
    )
    assert await store.get_answers(["a"]) == {"a": CallAnswer(ok=True, body="fresh")}
    assert await next_calls(store, "csv", "p1", old) == []


async def test_a_poison_head_is_given_up_and_the_key_moves_on(store: Store) -> None:
    await send(store, "poison", "csv", attempts=2)
    await send(store, "next", "csv")
    epoch = await own(store, "csv", "p1")
    assert await next_calls(store, "csv", "p1", epoch) == ["poison"]
    assert await next_calls(store, "csv", "p1", epoch) == ["poison"]

    taken, given_up = await store.take_key_calls(AGENT, "csv", owner="p1", epoch=epoch, limit=1)
    assert [c.call_id for c in given_up] == ["poison"]
    assert taken == []
    answer = (await store.get_answers(["poison"]))["poison"]
    assert isinstance(answer.body, dict)
    assert answer.body["type"] == GAVE_UP
    assert await next_calls(store, "csv", "p1", epoch) == ["next"]
    assert await store.waiting_keys(AGENT) == ["csv"]


async def test_answers_take_the_next_batch_when_it_is_due(
    store: Store, fake_clock: FakeClock
) -> None:
    for n in range(5):
        await send(store, f"c{n}", "csv")
    epoch = await own(store, "csv", "p1")
    assert await next_calls(store, "csv", "p1", epoch, limit=2) == ["c0", "c1"]

    # Three wait, fewer than max_items, the oldest not max_delay old: nothing taken.
    sent = store.now()
    fake_clock.advance(0.25)
    owned, taken, given_up, backlog = await store.answer_and_take(
        AGENT, "csv", owner="p1", epoch=epoch, answers=[("c0", 1, True, 0)],
        max_items=10, max_delay=1.0,
    )  # fmt: skip
    assert (owned, taken, given_up) == (True, [], [])
    # The backlog as the answers read it (c1, still unanswered, and c2 to c4):
    # the owner need not read it again to know when its next batch is due.
    assert backlog[0] == 4
    assert backlog[1] is not None
    assert abs((backlog[1] - sent).total_seconds()) < 0.01
    # A full batch is taken at once, in order, with the answers' commit.
    owned, taken, _, backlog = await store.answer_and_take(
        AGENT, "csv", owner="p1", epoch=epoch, answers=[("c1", 1, True, 1)],
        max_items=3, max_delay=1.0,
    )  # fmt: skip
    assert owned
    assert [c.call_id for c in taken] == ["c2", "c3", "c4"]
    assert backlog[0] == 3  # c2 to c4, read before the take
    assert await store.get_answers(["c0", "c1"]) == {
        "c0": CallAnswer(ok=True, body=0),
        "c1": CallAnswer(ok=True, body=1),
    }
    # Once the oldest waited max_delay, a smaller batch is due too.
    await send(store, "c5", "csv")
    fake_clock.advance(1.5)
    owned, taken, _, _ = await store.answer_and_take(
        AGENT, "csv", owner="p1", epoch=epoch, answers=[("c2", 1, True, 2)],
        max_items=10, max_delay=1.0,
    )  # fmt: skip
    assert [c.call_id for c in taken] == ["c3", "c4", "c5"]


async def test_a_stale_owner_answers_and_takes_nothing(store: Store, fake_clock: FakeClock) -> None:
    await send(store, "a", "csv")
    await send(store, "b", "csv")
    old = await own(store, "csv", "p1")
    await next_calls(store, "csv", "p1", old)
    fake_clock.advance(LEASE + 1)
    await own(store, "csv", "p2")

    result = await store.answer_and_take(
        AGENT, "csv", owner="p1", epoch=old, answers=[("a", 1, True, "stale")],
        max_items=1, max_delay=0.0,
    )  # fmt: skip
    assert result == (False, [], [], (0, None))
    assert await store.get_answers(["a"]) == {}
