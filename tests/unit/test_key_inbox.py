"""A key loop's inbox: handed and taken step requests in id order, each once; when to take."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from shepherd.core.records import Request
from shepherd.governance.handing import Handing, KeyInbox
from shepherd.store import signals as ch
from shepherd.store.ops import OwnerTake
from shepherd.store.signals import Signals

SOON = datetime(2030, 1, 1, tzinfo=UTC)


def request(request_id: int, *, task: str = "t", attempt: int = 1) -> Request:
    return Request(
        id=request_id,
        agent="ledger",
        task_id=f"{task}{request_id}",
        seq=1,
        attempt=attempt,
        lock_epoch=1,
        payload=None,
        complete_by=SOON,
    )


def drain(inbox: KeyInbox) -> list[int]:
    out = []
    while (head := inbox.next()) is not None:
        out.append(head.id)
    return out


async def test_handed_and_taken_requests_come_out_in_id_order_each_once() -> None:
    inbox = KeyInbox(epoch=3)
    wake = asyncio.Event()
    assert inbox.hand(request(7))
    assert inbox.arrived.is_set()
    # A take brings back a request handed already (its worker holds it) and an earlier one.
    inbox.took(wake, [request(5), request(7)], full=False)
    assert inbox.hand(request(5))  # handed after the take brought it: not twice
    assert drain(inbox) == [5, 7]
    assert not inbox.arrived.is_set()
    # Handled already: a late copy is not handled again; another attempt is another request.
    inbox.took(wake, [request(7), request(7, attempt=2)], full=False)
    assert [(r.id, r.attempt) for r in iter(inbox.next, None)] == [(7, 2)]
    inbox.open = False
    assert not inbox.hand(request(9))


async def test_a_loop_takes_when_just_acquired_rung_full_or_polled_only() -> None:
    inbox = KeyInbox(epoch=1)
    assert inbox.must_take()  # just acquired
    wake = asyncio.Event()
    inbox.took(wake, [request(1)], full=True)
    assert inbox.must_take()  # as many as asked for: more may wait
    inbox.took(wake, [], full=False)
    assert not inbox.must_take()
    assert inbox.hand(request(2))
    assert not inbox.must_take()  # a handed request is no reason to look at the store
    wake.set()  # CALLS rang since the last take
    assert inbox.must_take()
    inbox.took(asyncio.Event(), [], full=False)
    assert not inbox.must_take()
    inbox.polled()  # the wait ran out: a write no wake-up told of
    assert inbox.must_take()


class _Owner(Handing):
    """The handing part of an owner server, on stand-ins for its store and steps."""

    def __init__(self, agents: dict[str, Any]) -> None:
        self.owner = "p1/o"
        self.agents = agents
        self.store = cast("Any", SimpleNamespace(signals=Signals()))
        self.steps = cast("Any", SimpleNamespace(worker="p1/a"))
        self._inboxes = {}


async def test_a_step_is_handed_only_to_an_open_ownership_of_its_epoch() -> None:
    plain = SimpleNamespace(batch=None)
    batching = SimpleNamespace(batch=object())
    owner = _Owner({"ledger": plain, "ledger.batch": batching})
    assert owner.owner_take("ledger", "u1") is None  # not owned here
    assert owner._open("ledger.batch", "u1", 1) is None  # a batching agent takes from the store
    assert owner.owner_take("ledger.batch", "u1") is None
    inbox = owner._open("ledger", "u1", 4)
    assert owner.owner_take("ledger", "u1") == OwnerTake(worker="p1/a", owner="p1/o", epoch=4)

    wake = owner.store.signals.event(ch.CALLS)
    owner.hand("ledger", "u1", request(1), epoch=4)
    assert inbox is not None
    assert [r.id for r in iter(inbox.next, None)] == [1]
    assert not wake.is_set()
    # Of another ownership, or after this one ended: left in the store, the owners woken.
    owner.hand("ledger", "u1", request(2), epoch=3)
    assert wake.is_set()
    owner._close("ledger", "u1", inbox)
    assert owner.owner_take("ledger", "u1") is None
    wake = owner.store.signals.event(ch.CALLS)
    owner.hand("ledger", "u1", request(3), epoch=4)
    assert wake.is_set()
    assert inbox.next() is None
