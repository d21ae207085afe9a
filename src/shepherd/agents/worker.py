"""The Agent role: take requests, run handlers under `complete_by`, reply.

A handler wraps one remote service. Transient failures are retried with
exponential backoff and jitter inside the deadline; permanent ones are replied
as errors; unexpected exceptions (bugs) are retried like transient ones, logged
with their traceback, and replied as bugs if they persist; at `complete_by` the
handler is cancelled and nothing is replied (someone else may already be
retrying the step). What a handling does next is decided by
`shepherd.core.handling`; this is its shell, and `ends` carries out how it
ends. The handler of a `threads=True` agent is a plain function run in a
thread (`agent_threads`). The deadline, the retry backoff and the polling all
run on the app's clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, cast, final

from shepherd import tracing
from shepherd.agents.agent import Agent, BlockingHandler, Handler
from shepherd.agents.breakers import BreakerGate
from shepherd.agents.ends import Ends, Recorder
from shepherd.agents.gates import Gates
from shepherd.agents.helpers import WorkerHelpers
from shepherd.agents.intake import HAND_OVER_BELOW, Intake
from shepherd.agents.request import AgentRequest
from shepherd.agents.threads import ThreadedCalls
from shepherd.core.handling import Handling, Phase, ReplyResult, Retry, begin
from shepherd.core.records import JsonValue, Request
from shepherd.errors import StepSupersededError, StoreUnavailableError
from shepherd.failures import classify, log_bug
from shepherd.governance.capacity import CapacityGate
from shepherd.governance.rates import RateGate
from shepherd.metrics import AgentCounters

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.handling import Next
    from shepherd.metrics import Metrics
    from shepherd.registry import Standing
    from shepherd.store.roles import AgentStore

__all__ = ["HAND_OVER_BELOW", "Agent", "AgentWorker", "BlockingHandler", "Handler", "Recorder"]

log = logging.getLogger("shepherd.agent")


@final
class AgentWorker:
    """Hosts agents: leases their requests, runs handlers concurrently, replies.

    Args:
        store: The store, as an agent worker uses it.
        worker: This worker's name in the requests it takes.
        agents: The agents it runs (their requests are the ones it takes).
        settings: Concurrency, threads, polling and the breakers' refresh.
        clock: What deadlines, retry waits and polling run on.
        metrics: Where calls, retries, timeouts and breaker changes are counted.
        recorder: The scheduler of this process, if one runs here: a reply to a
            task it holds is recorded in the reply's own transaction and handed
            to it, one transaction less per step.
    """

    def __init__(
        self,
        store: AgentStore,
        *,
        worker: str,
        agents: Iterable[Agent],
        settings: Settings,
        clock: Clock,
        metrics: Metrics,
        recorder: Recorder | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.worker = worker
        self.agents = {a.name: a for a in agents}
        self.settings = settings
        self.rng = random.Random()
        self.metrics = metrics
        self.breakers = BreakerGate(
            store, refresh=settings.breaker_refresh, clock=clock, metrics=metrics
        )
        self.capacity = CapacityGate(
            store,
            worker=worker,
            lease=settings.slot_lease,
            refresh=settings.resolver_refresh,
            clock=clock,
        )
        self.rates = RateGate(store, refresh=settings.resolver_refresh, clock=clock)
        #: The gates, shared with the call and owner servers of this process.
        self.gates = Gates(breakers=self.breakers, rates=self.rates, capacity=self.capacity)
        self.helpers = WorkerHelpers(store, worker=worker)
        self.threaded = ThreadedCalls(limit=settings.agent_threads, metrics=metrics)
        self.ends = Ends(
            store,
            worker=worker,
            recorder=recorder,
            capacity=self.capacity,
            breakers=self.breakers,
            threaded=self.threaded,
            clock=clock,
        )
        self._agent_counters: dict[str, AgentCounters] = {}
        self.intake = Intake(
            store,
            worker=worker,
            # An exclusive agent's requests are taken by its keys' owners alone.
            agents={n: a for n, a in self.agents.items() if a.exclusive_by is None},
            settings=settings,
            clock=clock,
            threaded=self.threaded,
            handling=self._handling,
            counters=self._counters,
        )
        self.calls = 0
        self.retries = 0

    @property
    def standing(self) -> Standing | None:
        """Whether this process may take requests (its heartbeats reach the store); None: always."""
        return self.intake.standing

    @standing.setter
    def standing(self, standing: Standing | None) -> None:
        self.intake.standing = standing

    @property
    def recorder(self) -> Recorder | None:
        """The scheduler of this process, if one runs here (see the class's `recorder`)."""
        return self.ends.recorder

    @recorder.setter
    def recorder(self, recorder: Recorder | None) -> None:
        self.ends.recorder = recorder

    def statistics(self) -> dict[str, int]:
        return {
            "running": len(self.intake.running),
            "threaded": len(self.threaded.holding),
            "calls": self.calls,
            "retries": self.retries,
            "timeouts": self.ends.timeouts,
            "replied": self.ends.replied,
            **self.capacity.statistics(),
            **self.rates.statistics(),
        }

    async def run(self) -> None:
        """Take and handle requests, and renew capacity slots, until cancelled.

        If the renewals end (a damaged store, a bug), so does the worker, with
        their reason.
        """
        if not self.intake.agents:
            await asyncio.Event().wait()
        main = asyncio.current_task()
        assert main is not None
        renewals = asyncio.create_task(self.capacity.run(), name="shepherd slot renewals")
        renewals.add_done_callback(lambda _: main.cancel())
        try:
            await self.intake.run()
        except asyncio.CancelledError:
            if renewals.done() and not renewals.cancelled():
                renewals.result()  # raises why the renewals ended
                raise RuntimeError("the capacity slot renewals returned") from None
            raise
        finally:
            renewals.cancel()
            self.capacity.close()

    def _handling(self, request: Request, spec: Agent) -> Coroutine[None, None, None]:
        """The coroutine that handles `request` of `spec`: traced, on a thread, giving back
        its slot."""
        resource = spec.resource_of(request)
        handling: Coroutine[None, None, None] = (
            _traced(self._handle(request, spec, resource), request)
            if tracing.ENABLED and tracing.active()
            else self._handle(request, spec, resource)
        )
        if spec.threads:
            handling = self.threaded.hold(handling, request)
        if resource is not None:
            handling = self._giving_back(handling, request)
        return handling

    # -- requests the scheduler of this process hands over (see `Intake`) ------
    def reserve(self, agent: str) -> str | None:
        """Hold a free handling slot for a request of `agent`; this worker's name, or None."""
        return self.intake.reserve(agent)

    def unreserve(self) -> None:
        """Give back a slot `reserve` held: its request was not queued."""
        self.intake.unreserve()

    def hand(self, request: Request) -> None:
        """Handle `request`, which the store leased to this worker as it was queued."""
        self.intake.hand(request)

    async def _giving_back(self, handling: Awaitable[None], request: Request) -> None:
        """Run `handling`; then give back the slot it holds if its reply did not."""
        try:
            await handling
        finally:
            slot = self.capacity.held(_holder(self.worker, request))
            if slot is not None:
                await self.capacity.release(slot)

    async def _handle(self, request: Request, spec: Agent, resource: str | None) -> None:
        """Handle `request` of `spec`, holding a slot of `resource` if any, until it ends:
        `core.handling` decides each next thing."""
        if request.suspect:
            # A step that was running at a crash waited for an agent running no other
            # suspect: its window started when it was taken; a heartbeat carries it
            # to the step and the claim.
            try:
                started = await self.store.extend_step(request, worker=self.worker)
            except StoreUnavailableError:
                started = request.complete_by
            if started is None:
                return  # superseded while it waited
            request = replace(request, complete_by=started)
        now = self.store.now()
        handling = begin(
            complete_by=request.complete_by,
            now=now,
            retry=request.retry,
            policy=spec.retry,
            resource=resource,
            service=None if spec.breaker is None else spec.service_name,
        )
        if not isinstance(handling, Handling):
            if handling is not None:  # the request's retry policy is unreadable
                await self.ends.end(
                    handling, request, spec, slot=None, counters=self._counters(request.agent)
                )
            return
        call = AgentRequest.of_step(request, self.helpers)
        counters = self._counters(request.agent)
        # A capacity slot is held only for a resource: no name to make without one.
        holder = "" if resource is None else _holder(self.worker, request)
        result: JsonValue = None
        decision: Next = handling.start()
        try:
            # complete_by is on the store's clock: read it against the store's now.
            async with self.clock.deadline(request.complete_by, now=now) as scope:
                self.helpers.scopes[request.id] = scope
                while True:
                    if decision is Phase.TRY:
                        self.calls += 1
                        counters.calls.inc()
                        tried_at = self.clock.monotonic()
                        try:
                            if spec.threads:
                                fn = cast("BlockingHandler", spec.fn)
                                result = await self.threaded.call(fn, call, request)
                            else:
                                result = await cast("Handler", spec.fn)(call)
                        except StepSupersededError:
                            decision = handling.superseded()
                            break
                        except Exception as exc:
                            counters.duration.observe(self.clock.monotonic() - tried_at)
                            decision = self._failed(handling, exc, request, call, counters)
                        else:
                            counters.duration.observe(self.clock.monotonic() - tried_at)
                            decision = handling.succeeded()
                            break
                    elif isinstance(decision, Phase):  # a gate: a slot, the breaker, a token
                        decision = await self.gates.next(
                            decision,
                            handling,
                            spec,
                            resource=resource,
                            holder=holder,
                            fail_fast=False,  # a step waits while its breaker is open
                            now=self.store.now,
                            complete_by=call.complete_by,
                            rng=self.rng,
                        )
                    elif isinstance(decision, Retry):
                        call = replace(call, retry=handling.retries)
                        self.retries += 1
                        counters.retries.inc()
                        await self.clock.sleep(decision.delay)
                        decision = handling.slept()
                    else:
                        break
        except TimeoutError:
            if not scope.expired():
                raise
            decision = handling.expired()
        finally:
            self.helpers.scopes.pop(request.id, None)
        # Ended outside the deadline scope, so a reply being committed at the
        # deadline is not cut in half. The slot is given back with the reply.
        slot = None if resource is None else self.capacity.held(holder)
        if isinstance(decision, ReplyResult):
            if decision.answered:
                await self.breakers.after_call(spec, request, failed=False)
            await self.ends.reply(request, ok=True, body=result, slot=slot)
        else:
            await self.ends.end(decision, request, spec, slot=slot, counters=counters)

    def _failed(
        self,
        handling: Handling,
        exc: Exception,
        request: Request,
        call: AgentRequest,
        counters: AgentCounters,
    ) -> Next:
        """Tell `handling` how the try failed: what is next."""
        if tracing.ENABLED:
            tracing.tried(exc)
        kind = classify(exc)
        if kind == "permanent":
            counters.permanent.inc()
        elif kind == "transient":
            counters.transient.inc()
        else:
            # A bug says nothing about the service: its breaker is not told.
            counters.bug.inc()
        decision = handling.failed(
            exc,
            kind,
            retry_after=_retry_after(exc),
            now=self.store.now(),
            complete_by=call.complete_by,
            rng=self.rng,
        )
        if kind == "bug":
            log_bug(log, request, handling.tries, exc, last=not isinstance(decision, Retry))
        return decision

    def _counters(self, agent: str) -> AgentCounters:
        counters = self._agent_counters.get(agent)
        if counters is None:
            counters = self._agent_counters[agent] = AgentCounters.of(self.metrics, agent)
        return counters


async def _traced(handling: Awaitable[None], request: Request) -> None:
    """Run `handling` inside the request's step span (`shepherd.tracing`)."""
    with tracing.step_span(request):
        await handling


def _holder(worker: str, request: Request) -> str:
    """The holder of a handling's capacity slot: unique to one handling of one request."""
    return f"{worker}:{request.id}:{request.attempt}"


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None
