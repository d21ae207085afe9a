"""Steps handed to their key's owner in memory, as a plain step's go to its agent worker.

A step to an exclusive agent (not a batching one) whose key this process owns
right now is started with its request taken by the owner's worker in the
start's own transaction (`StepStart.taken_by` = an `OwnerTake`), behind the
owner's fence: only while the owner holds the key's live lease at the epoch
of its loop, and when no other request of the key waits before it (so a
key's steps are still handled in the order they were queued, across
processes). The request is then handed to the key's loop in memory, with no
take of the store and no wake-up of any owner; otherwise it is queued as
before and the loop takes it (`take_key_work`).

The loop (`OwnerServer._serve`) handles the requests handed to it and those
it takes from the store in id order, each once (a take returns again the
requests this owner's worker holds: they are told apart by id, step and
attempt), and takes from the store only when the store may hold work of the
key it has not taken: just acquired, the CALLS wake-up rang since its last
take (a request was queued untaken, a call sent), its last take came back
full, or its wait for work ran out (the poll for writes no wake-up announced).
A batching agent's keys keep taking from the store (no `OwnerTake` is given
for them): their batches gather what waits there.
"""

from __future__ import annotations

import asyncio
import heapq
from typing import TYPE_CHECKING, final

from shepherd.store import signals as ch
from shepherd.store.ops import OwnerTake

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from shepherd.agents.agent import Agent
    from shepherd.core.records import Request
    from shepherd.governance.owned_steps import OwnedSteps
    from shepherd.store.roles import OwnerStore

__all__ = ["Handing", "KeyInbox", "rest_handed"]

#: A request of a key, as its loop tells it from another: (id, task id, seq, attempt).
Seen = tuple[int, str, int, int]

#: The most requests an inbox remembers it was given (the oldest are long answered).
MAX_SEEN = 1000


def seen_of(request: Request) -> Seen:
    return (request.id, request.task_id, request.seq, request.attempt)


@final
class KeyInbox:
    """One ownership's step requests to handle, in id order, and whether to take again.

    Args:
        epoch: The ownership's epoch: the fence a start checks before handing to it.
    """

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        #: Whether a start may hand it requests (False once its loop has stopped).
        self.open = True
        #: Set when a request is handed: the loop's wait for work ends.
        self.arrived = asyncio.Event()
        self._queue: list[tuple[Seen, Request]] = []
        self._seen: set[Seen] = set()
        #: The store may hold work of the key not taken yet (True: just acquired).
        self._stale = True
        #: The CALLS wake-up taken before the last take (rung since: take again).
        self._wake: asyncio.Event | None = None

    def hand(self, request: Request) -> bool:
        """Add a request the store took for this owner as it was queued; False if closed."""
        if not self.open:
            return False
        self._add(request)
        self.arrived.set()
        return True

    def must_take(self) -> bool:
        """Whether the store may hold work of the key that this loop has not taken."""
        return self._stale or self._wake is None or self._wake.is_set()

    def polled(self) -> None:
        """The loop's wait for work ran out: look at the store (a write no wake-up told of)."""
        self._stale = True

    def took(self, wake: asyncio.Event, steps: Sequence[Request], *, full: bool) -> None:
        """A take from the store (`wake` taken before it) returned `steps`; `full`: as
        many items as it asked for, so more may wait."""
        self._wake = wake
        self._stale = full
        for request in steps:
            self._add(request)

    def next(self) -> Request | None:
        """The first request to handle (the lowest id), or None."""
        if not self._queue:
            self.arrived.clear()
            return None
        return heapq.heappop(self._queue)[1]

    def _add(self, request: Request) -> None:
        seen = seen_of(request)
        if seen in self._seen:  # taken again, or handed after a take brought it
            return
        if len(self._seen) >= 2 * MAX_SEEN:
            self._seen = set(sorted(self._seen)[-MAX_SEEN:])
        self._seen.add(seen)
        heapq.heappush(self._queue, (seen, request))


class Handing:
    """The part of an owner server a scheduler of its process hands steps to.

    Mixed into `OwnerServer`, which opens an inbox for each ownership of a
    non-batching agent's key (`_open`) and closes it when the ownership ends.
    """

    owner: str
    agents: dict[str, Agent]
    store: OwnerStore
    steps: OwnedSteps
    #: The inbox of each key owned (a non-batching agent's), by (agent, key).
    _inboxes: dict[tuple[str, str], KeyInbox]

    def owner_take(self, agent: str, key: str) -> OwnerTake | None:
        """The fence under which a step of `agent` for `key` may be taken by this owner as
        it is queued, or None: the key is not owned here now (or its agent batches)."""
        inbox = self._inboxes.get((agent, key))
        if inbox is None or not inbox.open:
            return None
        return OwnerTake(worker=self.steps.worker, owner=self.owner, epoch=inbox.epoch)

    def hand(self, agent: str, key: str, request: Request, *, epoch: int) -> None:
        """Give the key's loop of ownership `epoch` a request taken for it as it was queued.

        If that ownership has ended meanwhile, the request stays in the store,
        held by this owner's worker: the key's next owner takes it (a take takes
        a key's held requests again), and the owners here are woken to share
        the key out again at once.
        """
        inbox = self._inboxes.get((agent, key))
        if inbox is None or inbox.epoch != epoch or not inbox.hand(request):
            self.store.signals.ring(ch.CALLS)

    def _open(self, agent: str, key: str, epoch: int) -> KeyInbox | None:
        """A new ownership's inbox (None for a batching agent: it takes from the store)."""
        if self.agents[agent].batch is not None:
            return None
        inbox = self._inboxes[(agent, key)] = KeyInbox(epoch)
        return inbox

    def _close(self, agent: str, key: str, inbox: KeyInbox | None) -> None:
        """The ownership of `inbox` has ended (or is ending): no start hands it more."""
        if inbox is None:
            return
        inbox.open = False
        if self._inboxes.get((agent, key)) is inbox:
            del self._inboxes[(agent, key)]


async def rest_handed(
    rest: Callable[[asyncio.Event, float], Awaitable[bool]],
    wake: asyncio.Event,
    seconds: float,
    inbox: KeyInbox,
) -> bool:
    """A key loop's wait for work (`rest`: True once the key is idle), which a step
    handed to `inbox` ends as the CALLS wake-up `wake` does.

    A wait that ran out, neither rung nor handed anything, makes the loop look
    at the store next (`KeyInbox.polled`): writes of other processes are
    announced, and the poll is the safety net.
    """
    relay = asyncio.ensure_future(_relay(wake, inbox.arrived))
    try:
        if await rest(inbox.arrived, seconds):
            return True
    finally:
        relay.cancel()
    if not inbox.arrived.is_set():
        inbox.polled()
    return False


async def _relay(wake: asyncio.Event, arrived: asyncio.Event) -> None:
    await wake.wait()
    arrived.set()
