"""Which requests an agent worker takes, and when.

A worker handles at most `agent_concurrency` requests at once, those of its
`threads=True` agents only while a handler thread is free, and those of
suspect tasks (a task that crashed a process before) apart, one at a time.
Requests come two ways: leased from the queues by the take loop, or handed
over by the scheduler of this process as it queues them (`reserve`, then
`hand` or `unreserve`), which saves a transaction and a wake-up per step
while the worker has little to do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, final

from shepherd.errors import StoreUnavailableError
from shepherd.idle import IdleBackoff
from shepherd.outage import Outage
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping
    from datetime import datetime

    from shepherd.agents.agent import Agent
    from shepherd.agents.threads import ThreadedCalls
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.records import Request
    from shepherd.metrics import AgentCounters
    from shepherd.registry import Standing
    from shepherd.store.roles import AgentStore
    from shepherd.store.signals import Signals

__all__ = ["HAND_OVER_BELOW", "Intake"]

log = logging.getLogger("shepherd.agent")

#: Requests are handed over by the scheduler of this process only while fewer than
#: this many are being handled here. When work trickles in, handing a request over
#: saves a transaction and a wake-up per step (the lone latency); under load, one
#: take leases hundreds of queued requests in one statement, which costs less
#: Python per request than handing each over (W1: about 10 % more workflows/s).
HAND_OVER_BELOW = 16


@final
class Intake:
    """Takes an agent worker's requests and starts a handling of each in a task of its own.

    Args:
        store: The store, as an agent worker uses it.
        worker: The worker's name in the requests it takes.
        agents: The agents it runs, by name.
        settings: Concurrency and polling.
        clock: What the polling runs on.
        threaded: The worker's handler threads.
        handling: Makes the coroutine that handles a request of an agent.
        counters: Each agent's counters, by name.
    """

    def __init__(
        self,
        store: AgentStore,
        *,
        worker: str,
        agents: Mapping[str, Agent],
        settings: Settings,
        clock: Clock,
        threaded: ThreadedCalls,
        handling: Callable[[Request, Agent], Coroutine[None, None, None]],
        counters: Callable[[str], AgentCounters],
    ) -> None:
        self.store = store
        self.worker = worker
        self.agents = agents
        self.settings = settings
        self.concurrency = settings.agent_concurrency
        self.clock = clock
        self.threaded = threaded
        self.handling = handling
        self.counters = counters
        self.running: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        #: Requests of suspect tasks being handled (at most one at a time).
        self._suspects = 0
        #: Slots held for requests the scheduler of this process is handing over.
        self._reserved = 0
        #: Whether the take loop runs (only then are requests handed over).
        self._serving = False
        self.outage = Outage("agent requests", log=log, clock=clock, watch=store.watch)
        #: Whether this process may take requests (its heartbeats reach the store);
        #: None: always.
        self.standing: Standing | None = None

    async def run(self) -> None:
        """Take requests and start their handlings until cancelled; then cancel those."""
        signals: Signals = self.store.signals
        threaded = self.threaded
        plain = any(not a.threads for a in self.agents.values())
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        self._serving = True
        try:
            while True:
                free = self.concurrency - len(self.running) - self._reserved
                if free <= 0 or (threaded.free <= 0 and not plain):
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                    continue
                if self.standing is not None and not self.standing.takes_work():
                    await self.standing.wait_takes_work()
                    continue
                wake = signals.event(ch.REQUESTS)
                try:
                    requests, more = await self._take(free)
                except StoreUnavailableError as exc:  # wait it out; anything else stops us
                    await self.outage.pause(exc)
                    continue
                self.outage.over()
                if requests:
                    self._took(requests, self.store.now())
                for request in requests:
                    self._start(request)
                wait = backoff.next(found=bool(requests))
                if not more:
                    await self.clock.wait_event(wake, wait)
        finally:
            self._serving = False
            for task in list(self.running):
                task.cancel()
            await asyncio.gather(*self.running, return_exceptions=True)
            threaded.close()

    def _start(self, request: Request) -> None:
        """Handle a request leased to this worker, in a task of its own."""
        if request.suspect:
            self._suspects += 1
        spec = self.agents[request.agent]
        task = asyncio.create_task(self.handling(request, spec))
        if spec.threads:
            self.threaded.holding.add(task)
        self.running.add(task)
        if request.suspect:
            task.add_done_callback(self._suspect_done)
        task.add_done_callback(self._done)

    # -- requests the scheduler of this process hands over ---------------------
    def reserve(self, agent: str) -> str | None:
        """Hold a free handling slot for a request of `agent`; this worker's name, or None.

        None when this worker is not serving, does not host `agent` (or hosts it
        as an exclusive owner or on threads), has no free slot, or is busy (see
        HAND_OVER_BELOW): the request is then queued for any worker. A held slot
        ends with `hand` or `unreserve`.
        """
        spec = self.agents.get(agent)
        busy = len(self.running) + self._reserved
        if (
            not self._serving
            or (self.standing is not None and not self.standing.takes_work())
            or spec is None
            or spec.threads
            or spec.exclusive_by is not None
            or busy >= HAND_OVER_BELOW
            or busy >= self.concurrency
        ):
            return None
        self._reserved += 1
        return self.worker

    def unreserve(self) -> None:
        """Give back a slot `reserve` held: its request was not queued."""
        self._reserved -= 1
        self._slot_freed.set()

    def hand(self, request: Request) -> None:
        """Handle `request`, which the store leased to this worker as it was queued.

        The slot `reserve` held becomes its handling. A worker that has stopped
        meanwhile leaves it: the lease ends at its complete_by, as any taken
        request's does when its worker goes.
        """
        self._reserved -= 1
        if not self._serving:
            self._slot_freed.set()
            return
        self._took([request], self.store.now())
        self._start(request)

    async def _take(self, free: int) -> tuple[list[Request], bool]:
        """Lease up to `free` requests, at most `threaded.free` of them for threaded agents.

        Returns them, and whether a take came back full (more may be waiting).
        """
        take = self.store.take_requests
        room = self.threaded.free
        # A suspect (its task crashed a process before) runs apart from other suspects.
        suspects = 0 if self._suspects else 1
        blocking = sorted(n for n, a in self.agents.items() if a.threads)
        if room >= free or not blocking:
            taken = await take(
                agents=sorted(self.agents), worker=self.worker, limit=free, suspects=suspects
            )
            return taken, len(taken) == free
        plain = sorted(n for n, a in self.agents.items() if not a.threads)
        taken = (
            await take(agents=plain, worker=self.worker, limit=free, suspects=suspects)
            if plain
            else []
        )
        if any(r.suspect for r in taken):
            suspects = 0
        more = len(taken) == free
        room = min(room, free - len(taken))
        if room > 0:
            held = await take(agents=blocking, worker=self.worker, limit=room, suspects=suspects)
            taken += held
            more = more or len(held) == room
        return taken, more

    def _took(self, requests: list[Request], now: datetime) -> None:
        """Observe how long each request waited in its queue before this take (`now`)."""
        for request in requests:
            if request.created_at is not None:
                lag = (now - request.created_at).total_seconds()
                self.counters(request.agent).claim_lag.observe(max(lag, 0.0))

    def _suspect_done(self, task: asyncio.Task[None]) -> None:
        self._suspects -= 1

    def _done(self, task: asyncio.Task[None]) -> None:
        self.running.discard(task)
        if task in self.threaded.holding:
            full = self.threaded.free <= 0
            self.threaded.holding.discard(task)
            if full:  # requests of threaded agents left in the queue: look again now
                self.store.signals.ring(ch.REQUESTS)
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("agent worker failure", exc_info=task.exception())
