"""Capacity in the agent worker: at most `capacity` handlers use a resource at once.

A handler of an agent bound to a resource (`@app.agent(resource=...)`, or the
resource of its step's recorded resolution) holds one of the resource's slots
while it runs. Slots are leases in the store, shared by every process. The
handlers waiting for a resource's slots in one process stand in one line
(first come, first served), and one task takes slots for the head of the line,
as many in one transaction as are free, waiting on the `slots` channel (rung
when a slot is given back here or, by NOTIFY or datagram, in another process,
and polling as a safety net) while none is. The gate renews every slot of this
worker each third of `slot_lease`, and gives it back in the reply's transaction
or, when there is no reply, by itself. A process that dies keeps its slots only
until their lease ends. A resource without a capacity costs nothing after the
first look (`shepherd.governance.unlimited`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, final

from shepherd.core.resources import Slot
from shepherd.errors import StoreUnavailableError
from shepherd.governance.unlimited import Unlimited
from shepherd.outage import Outage
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.roles import AgentStore

__all__ = ["CapacityGate"]

log = logging.getLogger("shepherd.capacity")

#: The longest wait between two looks for a free slot when no wake-up comes.
_MAX_POLL = 1.0
#: The most waiters one take asks slots for.
_MAX_ASK = 256


@dataclass(slots=True)
class _Line:
    """The waiters for one resource's slots in this process, and the task taking for them."""

    waiting: deque[tuple[str, asyncio.Future[int | None]]] = field(default_factory=deque)
    pump: asyncio.Task[None] | None = None
    #: How many waiters a take asks for: the capacity last seen (1 at first).
    ask: int = 1


@final
class CapacityGate:
    """Takes, renews and gives back one agent worker's capacity slots.

    Args:
        store: The store that keeps the slots.
        worker: The worker's name (every slot it holds is renewed by it).
        lease: Seconds a slot lasts unrenewed (`slot_lease`).
        refresh: Seconds a resource seen without a capacity is trusted to stay
            so (`resolver_refresh`), besides the resolver's wake-ups.
        clock: What renewals and waits run on.
    """

    def __init__(
        self, store: AgentStore, *, worker: str, lease: float, refresh: float, clock: Clock
    ) -> None:
        self.store = store
        self.worker = worker
        self.lease = lease
        self.refresh = refresh
        self.clock = clock
        #: Slots asked for or held, by holder; given back when the handling ends.
        self._held: dict[str, Slot] = {}
        #: Holders whose slot the store granted (renewals expect to find them).
        self._granted: set[str] = set()
        #: Each resource's waiters in this process, first come first served.
        self._lines: dict[str, _Line] = {}
        self._releases: set[asyncio.Task[None]] = set()
        #: Resources seen without a capacity.
        self._uncapped = Unlimited(store.signals, clock=clock, refresh=refresh)
        self.waits = 0
        self.lost = 0
        self.outage = Outage("capacity slots", log=log, clock=clock, watch=store.watch)
        self.renewals_outage = Outage("slot renewals", log=log, clock=clock, watch=store.watch)

    def statistics(self) -> dict[str, int]:
        return {"slots_held": len(self._granted), "slot_waits": self.waits, "slots_lost": self.lost}

    async def acquire(self, resource: str, holder: str) -> Slot | None:
        """Return once `holder` holds a slot of `resource`; None if it has no capacity.

        Waits in this process's line for the resource (first come, first
        served); the caller's deadline scope ends the wait. A slot asked for
        stays this gate's to give back (`held`) even if the wait is cancelled:
        the store may have granted it at that moment.

        Raises:
            UnknownResourceError: There is no resource of that name.
        """
        if resource in self._uncapped:
            return None
        slot = Slot(resource, holder)
        self._held[holder] = slot
        line = self._lines.get(resource)
        if line is None:
            line = self._lines[resource] = _Line()
        granted: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        line.waiting.append((holder, granted))
        if line.pump is None or line.pump.done():
            line.pump = asyncio.create_task(self._pump(resource, line))
            line.pump.add_done_callback(_log_failure)
        try:
            capacity = await granted
        except Exception:
            self.forget(slot)  # refused (an unknown resource): nothing is held
            raise
        if capacity is None:
            self.forget(slot)
            return None
        return slot

    async def _pump(self, resource: str, line: _Line) -> None:
        """Take slots for the resource's waiters, as many at once as are free, in order.

        One take at a time per resource from this process: a freed slot costs
        one store transaction for every waiter here, not one per waiter.
        """
        signals = self.store.signals
        while True:
            while line.waiting and line.waiting[0][1].done():
                line.waiting.popleft()  # its wait ended (deadline, stop)
            if not line.waiting:
                return
            wake = signals.event(ch.SLOTS)
            asking = [h for h, f in itertools.islice(line.waiting, line.ask) if not f.done()]
            try:
                granted, capacity = await self.store.acquire_slots(
                    resource, asking, worker=self.worker, lease=self.lease
                )
            except StoreUnavailableError as exc:
                await self.outage.pause(exc)
                continue
            except Exception as exc:
                for _, future in line.waiting:
                    if not future.done():
                        future.set_exception(exc)
                line.waiting.clear()
                return
            self.outage.over()
            if capacity is None:
                self._uncapped.remember(resource)
                for _, future in line.waiting:
                    if not future.done():
                        future.set_result(None)
                line.waiting.clear()
                return
            line.ask = max(1, min(capacity, _MAX_ASK))
            if granted:
                self._hand_out(resource, line, set(granted), capacity)
                continue
            self.waits += 1
            await self.clock.wait_event(wake, min(self.lease / 3, _MAX_POLL))

    def _hand_out(self, resource: str, line: _Line, granted: set[str], capacity: int) -> None:
        kept: deque[tuple[str, asyncio.Future[int | None]]] = deque()
        for holder, future in line.waiting:
            if holder not in granted:
                kept.append((holder, future))
                continue
            self._granted.add(holder)
            if future.done():  # it stopped waiting as the slot came: give it back
                slot = self._held.get(holder) or Slot(resource, holder)
                job = asyncio.create_task(self.release(slot))
                self._releases.add(job)
                job.add_done_callback(self._releases.discard)
            else:
                future.set_result(capacity)
        line.waiting = kept

    def close(self) -> None:
        """Stop taking slots for anyone (the worker stops; its waiters are cancelled)."""
        for line in self._lines.values():
            if line.pump is not None:
                line.pump.cancel()

    def held(self, holder: str) -> Slot | None:
        """The slot `holder` asked for or holds and has not given back, if any."""
        return self._held.get(holder)

    def forget(self, slot: Slot) -> None:
        """Stop renewing `slot` (given back by a reply's transaction)."""
        self._held.pop(slot.holder, None)
        self._granted.discard(slot.holder)

    async def release(self, slot: Slot) -> None:
        """Give `slot` back now; through a store outage, its lease runs out instead."""
        self.forget(slot)
        try:
            await self.store.release_slots([slot])
        except StoreUnavailableError as exc:
            log.info(
                "could not give back a slot of %r (%s): it is free once its lease ends",
                slot.resource,
                exc,
            )

    async def run(self) -> None:
        """Renew this worker's slots every third of the lease while it holds any."""
        while True:
            await self.clock.sleep(self.lease / 3)
            if not self._granted:
                continue
            expected = set(self._granted)
            try:
                renewed = await self.store.renew_slots(worker=self.worker, lease=self.lease)
            except StoreUnavailableError as exc:
                await self.renewals_outage.pause(exc)
                continue
            self.renewals_outage.over()
            kept = {slot.holder for slot in renewed}
            for holder in sorted(expected - kept):
                slot = self._held.get(holder)
                if slot is None or holder not in self._granted:
                    continue  # given back meanwhile
                self.lost += 1
                self._granted.discard(holder)
                log.warning(
                    "slot %s of %r expired before it could be renewed (the store was out "
                    "of reach for longer than slot_lease): until this handler ends, the "
                    "resource may have one user more than its capacity",
                    holder,
                    slot.resource,
                )


def _log_failure(task: asyncio.Task[None]) -> None:
    """A line's task that failed leaves its waiters to their deadlines: say why, loudly."""
    if not task.cancelled() and task.exception() is not None:
        log.error("taking capacity slots failed", exc_info=task.exception())
