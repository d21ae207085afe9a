"""The circuit breaker in the agent worker: a shell around `shepherd.core.breaker`.

Every agent process shares one breaker per remote service through the store.
The gate keeps a copy of each breaker with the time it was read: while the copy
is closed and younger than `breaker_refresh`, a try goes ahead with no store
round trip, and a success on a clean breaker writes nothing. Only failures, and
successes that can change something, are reported; only a probe that may be
due asks the store to decide. A closed breaker is re-read every `breaker_refresh`
seconds; an open one is waited out on the `breakers` channel (rung in-process,
and by NOTIFY from other processes on PostgreSQL), polling no more often than
the earlier of the cool-down's end and `breaker_refresh`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.core.breaker import Breaker, BreakerState, Call, Probe, Wait, allow, transition
from shepherd.errors import StoreUnavailableError
from shepherd.store import signals as ch
from shepherd.store.signals import Signals

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent
    from shepherd.clock import Clock
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.records import Request
    from shepherd.metrics import Metrics
    from shepherd.store.roles import AgentStore

__all__ = ["BreakerGate"]

log = logging.getLogger("shepherd.breaker")

#: The shortest wait between two looks at an open breaker, whatever the clocks say:
#: a store clock slightly behind ours must not turn the wait into a busy loop.
_MIN_WAIT = 0.01


@dataclass(frozen=True, slots=True)
class _Known:
    """A copy of a shared breaker and the app clock's monotonic time when it was read."""

    breaker: Breaker
    read_at: float


@final
class BreakerGate:
    """Asks the shared breaker of an agent's service before each try, and reports after.

    Args:
        store: The store that holds the shared breakers.
        refresh: Seconds a copy of a closed breaker is trusted (`breaker_refresh`).
        clock: What the copies' ages and the waits on an open breaker run on.
        metrics: Where waits and changes of state are counted.
    """

    def __init__(
        self, store: AgentStore, *, refresh: float, clock: Clock, metrics: Metrics
    ) -> None:
        self.store = store
        self.refresh = refresh
        self.clock = clock
        self.metrics = metrics
        self._known: dict[str, _Known] = {}
        self._reads: dict[str, asyncio.Future[_Known]] = {}

    def statistics(self) -> dict[str, str]:
        """The state of each breaker as this process last saw it."""
        return {service: str(known.breaker.state) for service, known in self._known.items()}

    async def before_call(self, agent: Agent, request: Request | None = None) -> None:
        """Return when a try may be made now; wait while the service's breaker is open.

        The caller's deadline scope cancels the wait when complete_by passes.
        """
        policy = agent.breaker
        if policy is None:
            return
        known = self._known.get(agent.service_name)
        if known is not None and known.breaker.state is BreakerState.CLOSED and self._fresh(known):
            return
        await self._ask(agent, policy, wait=True)

    async def admits(self, agent: Agent) -> bool:
        """Whether a try may be made now, without waiting: False while the service's
        breaker is open (or its probe is another caller's).

        A durable call (`app.call`) asks this: its caller is refused at once
        rather than held for the cool-down.
        """
        policy = agent.breaker
        if policy is None:
            return True
        known = self._known.get(agent.service_name)
        if known is not None and known.breaker.state is BreakerState.CLOSED and self._fresh(known):
            return True
        return await self._ask(agent, policy, wait=False)

    async def _ask(self, agent: Agent, policy: BreakerPolicy, *, wait: bool) -> bool:
        try:
            return await self._admit(agent.service_name, policy, wait=wait)
        except StoreUnavailableError as exc:
            # Without the store the breaker cannot be shared: let the try go ahead
            # (its reply needs the store anyway) rather than hold every call.
            log.debug("breaker of %r unreadable, calling: %s", agent.service_name, exc)
            return True

    async def after_call(
        self, agent: Agent, request: Request | None = None, *, failed: bool
    ) -> None:
        """Report a try's outcome: `failed` for a transient failure or a hang."""
        policy = agent.breaker
        if policy is None:
            return
        service = agent.service_name
        known = self._known.get(service)
        if not failed and known is not None and _clean(known.breaker, policy):
            return  # a success on a healthy breaker changes nothing: no write
        try:
            before, after = await self.store.breaker_report(service, policy, failed=failed)
        except StoreUnavailableError as exc:  # the count is lost; the next report counts
            log.debug("breaker of %r: outcome not counted: %s", service, exc)
            return
        self._changed(before, after)
        self._remember(after)

    # -- waiting -------------------------------------------------------------
    async def _admit(self, service: str, policy: BreakerPolicy, *, wait: bool) -> bool:
        """True once a try may be made; while the breaker is open, wait (`wait`) or False."""
        signals: Signals = self.store.signals
        waited = False
        stale = False
        while True:
            # Taken before looking: a change rung after the look is not missed.
            wake = signals.event(ch.BREAKERS)
            known = self._known.get(service)
            if known is None or stale or not self._fresh(known):
                known = await self._read(service)
                stale = False
            b = known.breaker
            _, decision = allow(b, policy, now=self.store.now())
            if isinstance(decision, Call):
                return True
            if isinstance(decision, Probe):
                # A probe may be due: only the store can give it, to one caller.
                after, decision = await self.store.breaker_allow(service, policy)
                self._changed(b, after)
                known = self._remember(after)
                if not isinstance(decision, Wait):
                    return True
            if not wait:
                return False
            if not waited:
                waited = True
                self.metrics.breaker_waits.labels(service=service).inc()
            until = (decision.until - self.store.now()).total_seconds()
            rang = await self.clock.wait_event(wake, max(_MIN_WAIT, min(until, self.refresh)))
            if self._known.get(service) is known:
                # Nobody here has a newer copy: read the shared breaker again if
                # it changed somewhere, or if the wait ended before the cool-down.
                stale = rang or self.store.now() < decision.until

    async def _read(self, service: str) -> _Known:
        """The shared breaker, read once for every try of this process waiting on it."""
        pending = self._reads.get(service)
        if pending is None:
            pending = asyncio.ensure_future(self._load(service))
            self._reads[service] = pending
            pending.add_done_callback(lambda done: self._forget_read(service, done))
        # Shielded: one waiter reaching its deadline does not cancel the others' read.
        return await asyncio.shield(pending)

    def _forget_read(self, service: str, done: asyncio.Future[_Known]) -> None:
        if self._reads.get(service) is done:
            del self._reads[service]
        if not done.cancelled():
            done.exception()  # retrieved: its waiters saw it, if any were left

    async def _load(self, service: str) -> _Known:
        stored = await self.store.get_breaker(service)
        return self._remember(stored or Breaker(service=service))

    # -- the copy ------------------------------------------------------------
    def _fresh(self, known: _Known) -> bool:
        return self.clock.monotonic() - known.read_at < self.refresh

    def _remember(self, b: Breaker) -> _Known:
        """Keep `b`, just returned by the store, as the copy (unless ours is newer)."""
        current = self._known.get(b.service)
        if current is not None and current.breaker.version > b.version:
            b = current.breaker  # a report came back while this read was on its way
        known = self._known[b.service] = _Known(b, self.clock.monotonic())
        return known

    def _changed(self, before: Breaker, after: Breaker) -> None:
        """Count and log a change of state that this process made."""
        change = transition(before, after)
        if change is None:
            return
        old, new = change
        service = after.service
        self.metrics.breaker_transitions.labels(service=service, change=f"{old}->{new}").inc()
        if new is BreakerState.OPEN:
            log.warning(
                "circuit breaker of %r opened (%s -> open): %d failures in a row, "
                "%d of %d calls in the window failed",
                service,
                old,
                after.consecutive_failures,
                after.window_failures,
                after.window_calls,
            )
        else:
            log.info("circuit breaker of %r: %s -> %s", service, old, new)


def _clean(b: Breaker, policy: BreakerPolicy) -> bool:
    """Whether a success would change nothing worth writing."""
    return (
        b.state is BreakerState.CLOSED
        and b.consecutive_failures == 0
        and policy.failure_ratio is None
    )
