"""A key loop's inbox: handed and taken step requests in id order, each once; when to take."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from shepherd.core.records import Request
from shepherd.governance.handing import KeyInbox

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
