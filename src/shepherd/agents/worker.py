"""The Agent role: take requests, run handlers under `complete_by`, reply.

A handler wraps one remote service. Transient failures are retried with
exponential backoff and jitter inside the deadline; permanent ones are replied
as errors; unexpected exceptions (bugs) are retried like transient ones, logged
with their traceback, and replied as bugs if they persist; at `complete_by` the
handler is cancelled and nothing is replied (someone else may already be
retrying the step). The handler of a `threads=True` agent is a plain function
run in a thread (`agent_threads`). The deadline, the retry backoff and the
polling all run on the app's clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast, final

from shepherd import tracing
from shepherd.agents.batch import Batch
from shepherd.agents.breakers import BreakerGate
from shepherd.agents.capacity import CapacityGate
from shepherd.agents.rates import RateGate
from shepherd.agents.request import AgentRequest, StepHelpers
from shepherd.agents.threads import ThreadedCalls
from shepherd.clock import Deadline
from shepherd.core.breaker import BreakerPolicy
from shepherd.core.events import EventKind
from shepherd.core.records import JsonValue, Reply, Request
from shepherd.core.retry import RetryPolicy, next_retry
from shepherd.errors import (
    CommitUnknownError,
    OutcomeUnknownError,
    PayloadError,
    StepSupersededError,
    StoreUnavailableError,
    UnknownResourceError,
)
from shepherd.failures import FailureKind, bug_body, classify, error_body, log_bug
from shepherd.idle import IdleBackoff
from shepherd.metrics import AgentCounters
from shepherd.outage import Outage
from shepherd.store import signals as ch
from shepherd.store.signals import Signals
from shepherd.tasklog import request_fields

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.resources import Slot
    from shepherd.metrics import Metrics
    from shepherd.registry import Standing
    from shepherd.store.roles import AgentStore

log = logging.getLogger("shepherd.agent")


Handler = Callable[[AgentRequest], Awaitable[JsonValue]]
#: The handler of a `threads=True` agent: a plain function, run in a thread.
BlockingHandler = Callable[[AgentRequest], JsonValue]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """A registered agent: its handler and its policies."""

    name: str
    fn: Handler | BlockingHandler
    retry: RetryPolicy
    #: Default step window for calls to this agent (seconds), or the app default.
    within: float | None = None
    #: The circuit breaker policy of the agent's service, or None for no breaker.
    breaker: BreakerPolicy | None = None
    #: The remote service's name; agents naming the same service share one breaker.
    service: str | None = None
    #: Whether `fn` is a plain function run in a thread (else an `async def`).
    threads: bool = False
    #: The resource whose capacity slot a handling holds (else the resolution's, if any).
    resource: str | None = None
    #: For an exclusive agent: the payload field, or the function of the payload,
    #: giving each call's owning key (one owner process per key at a time).
    exclusive_by: str | Callable[[JsonValue], object] | None = None
    #: For an exclusive agent: how its owner gathers a key's calls into one
    #: handling (the handler then takes and returns lists), or None.
    batch: Batch | None = None

    @property
    def service_name(self) -> str:
        """The service whose breaker this agent uses (default: the agent's name)."""
        return self.service or self.name


#: Requests are handed over by the scheduler of this process only while fewer than
#: this many are being handled here. When work trickles in, handing a request over
#: saves a transaction and a wake-up per step (the lone latency); under load, one
#: take leases hundreds of queued requests in one statement, which costs less
#: Python per request than handing each over (W1: about 10 % more workflows/s).
HAND_OVER_BELOW = 16


class Recorder(Protocol):
    """The scheduler of an agent worker's own process, as the worker hands it replies."""

    @property
    def owner(self) -> str:
        """Its name as the holder of the tasks it claims."""
        ...

    def deliver(self, reply: Reply) -> None:
        """Hand over a reply recorded on its step."""
        ...

    def recheck(self, task_id: str, seq: int) -> None:
        """Have the step waiting for `(task_id, seq)` read its outcome from the store."""
        ...


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
        self.recorder = recorder
        self.clock = clock
        self.worker = worker
        self.agents = {a.name: a for a in agents}
        self.settings = settings
        self.concurrency = settings.agent_concurrency
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
        self.helpers = WorkerHelpers(self)
        self.threaded = ThreadedCalls(limit=settings.agent_threads, metrics=metrics)
        self._agent_counters: dict[str, AgentCounters] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self.calls = 0
        self.retries = 0
        self.timeouts = 0
        self.replied = 0
        #: Requests of suspect tasks being handled (at most one at a time).
        self._suspects = 0
        #: Slots held for requests the scheduler of this process is handing over.
        self._reserved = 0
        #: Whether the take loop runs (only then are requests handed over).
        self._serving = False
        self.takes_outage = Outage("agent requests", log=log, clock=clock, watch=store.watch)
        self.replies_outage = Outage("agent replies", log=log, clock=clock, watch=store.watch)
        #: Whether this process may take requests (its heartbeats reach the store);
        #: None: always.
        self.standing: Standing | None = None

    def statistics(self) -> dict[str, int]:
        return {
            "running": len(self._running),
            "threaded": len(self.threaded.holding),
            "calls": self.calls,
            "retries": self.retries,
            "timeouts": self.timeouts,
            "replied": self.replied,
            **self.capacity.statistics(),
            **self.rates.statistics(),
        }

    async def run(self) -> None:
        """Take and handle requests, and renew capacity slots, until cancelled.

        If the renewals end (a damaged store, a bug), so does the worker, with
        their reason.
        """
        if not self.agents:
            await asyncio.Event().wait()
        main = asyncio.current_task()
        assert main is not None
        renewals = asyncio.create_task(self.capacity.run(), name="shepherd slot renewals")
        renewals.add_done_callback(lambda _: main.cancel())
        try:
            await self._take_loop()
        except asyncio.CancelledError:
            if renewals.done() and not renewals.cancelled():
                renewals.result()  # raises why the renewals ended
                raise RuntimeError("the capacity slot renewals returned") from None
            raise
        finally:
            renewals.cancel()
            self.capacity.close()

    async def _take_loop(self) -> None:
        signals: Signals = self.store.signals
        threaded = self.threaded
        plain = any(not a.threads for a in self.agents.values())
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        self._serving = True
        try:
            while True:
                free = self.concurrency - len(self._running) - self._reserved
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
                    await self.takes_outage.pause(exc)
                    continue
                self.takes_outage.over()
                if requests:
                    self._took(requests, self.store.now())
                for request in requests:
                    self._start(request)
                wait = backoff.next(found=bool(requests))
                if not more:
                    await self.clock.wait_event(wake, wait)
        finally:
            self._serving = False
            for task in list(self._running):
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)
            threaded.close()

    def _start(self, request: Request) -> None:
        """Handle a request leased to this worker, in a task of its own."""
        if request.suspect:
            self._suspects += 1
        spec = self.agents[request.agent]
        handling: Coroutine[None, None, None] = (
            _traced(self._handle(request), request)
            if tracing.ENABLED and tracing.active()
            else self._handle(request)
        )
        if spec.threads:
            handling = self.threaded.hold(handling, request)
        if CapacityGate.resource_of(spec, request) is not None:
            handling = self._giving_back(handling, request)
        task = asyncio.create_task(handling)
        if spec.threads:
            self.threaded.holding.add(task)
        self._running.add(task)
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
        busy = len(self._running) + self._reserved
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

    def _suspect_done(self, task: asyncio.Task[None]) -> None:
        self._suspects -= 1

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if task in self.threaded.holding:
            full = self.threaded.free <= 0
            self.threaded.holding.discard(task)
            if full:  # requests of threaded agents left in the queue: look again now
                self.store.signals.ring(ch.REQUESTS)
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("agent worker failure", exc_info=task.exception())

    async def _giving_back(self, handling: Awaitable[None], request: Request) -> None:
        """Run `handling`; then give back the slot it holds if its reply did not."""
        try:
            await handling
        finally:
            slot = self.capacity.held(_holder(self.worker, request))
            if slot is not None:
                await self.capacity.release(slot)

    async def _handle(self, request: Request) -> None:
        spec = self.agents[request.agent]
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
        if request.complete_by <= now:
            return
        try:
            policy = spec.retry if request.retry is None else RetryPolicy.from_json(request.retry)
        except ValueError as exc:
            await self._reply(request, ok=False, body=error_body(exc))
            return
        call = AgentRequest(
            payload=request.payload,
            idempotency_key=f"{request.task_id}/{request.seq}",
            attempt=request.attempt,
            retry=0,
            complete_by=request.complete_by,
            task_id=request.task_id,
            seq=request.seq,
            agent=request.agent,
            within=request.within,
            _helpers=self.helpers,
            _source=request,
        )
        agent = request.agent
        counters = self._counters(agent)
        resource = CapacityGate.resource_of(spec, request)
        slot: Slot | None = None
        #: What the handling waits for on its resource now: "slot", "rate", or None.
        held_back: str | None = None
        waiting_for_breaker = False
        tries = 0
        failure: BaseException | None = None
        #: What the last failed try was (None after a success).
        kind: FailureKind | None = None
        #: How the handling ended inside the deadline: a reply to send, or nothing.
        reply: tuple[bool, JsonValue] | None = None
        try:
            # complete_by is on the store's clock: read it against the store's now.
            async with self.clock.deadline(request.complete_by, now=now) as scope:
                self.helpers.scopes[request.id] = scope
                if resource is not None:
                    held_back = "slot"
                    try:
                        slot = await self.capacity.acquire(resource, _holder(self.worker, request))
                    except UnknownResourceError as exc:
                        reply = (False, error_body(exc))
                    held_back = None
                while reply is None:
                    waiting_for_breaker = True
                    await self.breakers.before_call(spec, request)
                    waiting_for_breaker = False
                    if resource is not None:
                        held_back = "rate"
                        try:
                            await self.rates.before_call(resource)
                        except UnknownResourceError as exc:
                            reply = (False, error_body(exc))
                            break
                        held_back = None
                    tries += 1
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
                        log.info(
                            "%s %s/%s: superseded",
                            agent,
                            request.task_id,
                            request.seq,
                            extra=request_fields(request),
                        )
                        return
                    except Exception as exc:
                        counters.duration.observe(self.clock.monotonic() - tried_at)
                        failure = exc
                        if tracing.ENABLED:
                            tracing.tried(exc)
                    else:
                        counters.duration.observe(self.clock.monotonic() - tried_at)
                        kind = None
                        reply = (True, result)
                        break
                    kind = classify(failure)
                    if kind == "permanent":
                        counters.permanent.inc()
                        reply = (False, error_body(failure))
                        break
                    if kind == "transient":
                        counters.transient.inc()
                        await self.breakers.after_call(spec, request, failed=True)
                    else:
                        # A bug says nothing about the service: its breaker is not told.
                        counters.bug.inc()
                    call = replace(call, retry=call.retry + 1)
                    delay = next_retry(
                        policy,
                        call.retry,
                        self.rng,
                        now=self.store.now(),
                        complete_by=call.complete_by,
                        retry_after=_retry_after(failure),
                    )
                    if kind == "bug":
                        log_bug(log, request, tries, failure, last=delay is None)
                        if delay is None:
                            # Out of tries, or the next one would pass complete_by:
                            # reply now, while the reply still counts.
                            reply = (False, bug_body(failure, tries=tries))
                            break
                    if delay is None:
                        break
                    self.retries += 1
                    counters.retries.inc()
                    await self.clock.sleep(delay)
        except TimeoutError:
            if not scope.expired():
                raise
        else:
            if reply is not None:
                if kind != "bug" and tries:
                    # The service answered (a permanent refusal too): not a breaker failure.
                    await self.breakers.after_call(spec, request, failed=False)
                # Replied outside the deadline scope, so a reply being committed at
                # the deadline is not cut in half. The slot is given back with it.
                await self._reply(request, ok=reply[0], body=reply[1], slot=slot)
                return
            # Out of tries or time: say nothing; the supervisor sees complete_by pass.
            assert failure is not None
            log.warning(
                "%s %s/%s: giving up after %d tries: %s",
                agent,
                request.task_id,
                request.seq,
                tries,
                failure,
                extra=request_fields(request),
            )
            await self._note(
                request, EventKind.STEP_GAVE_UP, tries=tries, error=error_body(failure)
            )
            return
        finally:
            self.helpers.scopes.pop(request.id, None)
        # complete_by passed: reply nothing (someone else may already be retrying).
        self.timeouts += 1
        counters.timeouts.inc()
        if held_back is not None:
            cause, says = _HELD_BACK[held_back]
            message = says.format(resource=resource)
            log.info(
                "%s %s/%s: %s",
                agent,
                request.task_id,
                request.seq,
                message,
                extra=request_fields(request),
            )
            await self._note(
                request,
                EventKind.STEP_TIMED_OUT,
                tries=tries,
                error={"type": cause, "message": message},
            )
            return
        if waiting_for_breaker:
            log.info(
                "%s %s/%s: breaker of %r still open at complete_by",
                agent,
                request.task_id,
                request.seq,
                spec.service_name,
                extra=request_fields(request),
            )
            await self._note(
                request,
                EventKind.STEP_TIMED_OUT,
                tries=tries,
                error={
                    "type": "BreakerOpen",
                    "message": f"the circuit breaker of {spec.service_name!r} stayed open",
                },
            )
            return
        if not self.threaded.overdue(request):  # else it said so, naming the thread
            log.info(
                "%s %s/%s: cancelled at complete_by",
                agent,
                request.task_id,
                request.seq,
                extra=request_fields(request),
            )
        if tries > call.retry:
            # The try in flight hung: for the service's breaker, a failure.
            await self.breakers.after_call(spec, request, failed=True)
        error: JsonValue = None
        if failure is not None:
            error = bug_body(failure, tries=tries) if kind == "bug" else error_body(failure)
        await self._note(request, EventKind.STEP_TIMED_OUT, tries=tries, error=error)

    def _took(self, requests: list[Request], now: datetime) -> None:
        """Observe how long each request waited in its queue before this take (`now`)."""
        for request in requests:
            if request.created_at is not None:
                lag = (now - request.created_at).total_seconds()
                self._counters(request.agent).claim_lag.observe(max(lag, 0.0))

    def _counters(self, agent: str) -> AgentCounters:
        counters = self._agent_counters.get(agent)
        if counters is None:
            counters = self._agent_counters[agent] = AgentCounters.of(self.metrics, agent)
        return counters

    async def _note(
        self, request: Request, kind: EventKind, *, tries: int, error: JsonValue
    ) -> None:
        """Leave the reason in the task's history, for the operator and the alert."""
        if tracing.ENABLED:
            tracing.failed(str(kind))
        detail = {
            "seq": request.seq,
            "agent": request.agent,
            "attempt": request.attempt,
            "tries": tries,
        }
        if error is not None:
            detail["error"] = error
        try:
            await self.store.note(request.task_id, kind, detail)
        except Exception:  # the history is a courtesy; the supervisor recovers anyway
            log.exception(
                "could not record %s for %s/%s",
                kind,
                request.task_id,
                request.seq,
                extra=request_fields(request),
            )

    async def _reply(
        self, request: Request, *, ok: bool, body: JsonValue, slot: Slot | None = None
    ) -> bool:
        """Reply, acknowledge and give back `slot`; through a store outage, try again
        until complete_by.

        A retry after an unknown commit is safe: if the first one committed, the
        request is gone and the retry replies nothing.
        """
        recorder = self.recorder
        trace = None
        if tracing.ENABLED and tracing.active():
            trace = tracing.current()
            if not ok:
                tracing.failed(_told(body))
        while True:
            try:
                replied = await self.store.reply_and_ack(
                    request,
                    worker=self.worker,
                    ok=ok,
                    body=body,
                    slot=slot,
                    recorder=None if recorder is None else recorder.owner,
                    trace=trace,
                )
            except StoreUnavailableError as exc:
                if recorder is not None and isinstance(exc, CommitUnknownError):
                    # It may have been recorded for the scheduler here, which would
                    # then never hear of it: that step looks at the store again.
                    recorder.recheck(request.task_id, request.seq)
                if self.store.now() >= request.complete_by:
                    # Too late to count: the supervisor sees complete_by pass.
                    log.warning(
                        "%s %s/%s: reply lost to a store outage at complete_by",
                        request.agent,
                        request.task_id,
                        request.seq,
                        extra=request_fields(request),
                    )
                    return False
                await self.replies_outage.pause(exc)
                continue
            self.replies_outage.over()
            if slot is not None:
                self.capacity.forget(slot)
            if isinstance(replied, Reply):
                if recorder is not None:
                    recorder.deliver(replied)
                replied = True
            if replied:
                self.replied += 1
            return replied


@final
class WorkerHelpers(StepHelpers):
    """`request.heartbeat()` and `request.once()` for the requests of one worker."""

    def __init__(self, worker: AgentWorker) -> None:
        self.worker = worker
        #: The deadline scope of each request being handled, by its queue id.
        self.scopes: dict[int, Deadline] = {}

    async def heartbeat(self, request: AgentRequest) -> datetime:
        """Move the step's deadlines in the store, then the handler's own deadline."""
        source = _source(request)
        complete_by = await self.worker.store.extend_step(source, worker=self.worker.worker)
        if complete_by is None:
            raise StepSupersededError(request.task_id, request.seq, request.attempt)
        scope = self.scopes.get(source.id)
        if scope is not None and not scope.expired():
            scope.reschedule(complete_by, now=self.worker.store.now())
        request.complete_by = complete_by
        return complete_by

    async def once(
        self,
        request: AgentRequest,
        key: str,
        effect: Callable[[], Awaitable[JsonValue]],
    ) -> JsonValue:
        """Mark `key` started (committed), run `effect`, record its result.

        A cancelled effect (the deadline passed, the process stops) leaves the
        mark `started`: nobody knows whether it happened.
        """
        store = self.worker.store
        source = _source(request)
        holder = f"{self.worker.worker}:{source.id}:{request.attempt}"
        state, recorded = await store.begin_once(key, holder=holder)
        if state == "done":
            return recorded
        if state != "new":
            raise OutcomeUnknownError(
                f"side effect {key!r} was started by an earlier execution that never recorded "
                "its outcome: it may have happened. Check it with the remote service; then "
                f"`shepherd retry {request.task_id} --step {request.seq}` clears the mark and "
                "runs the step again",
                agent=request.agent,
                seq=request.seq,
                detail={"key": key, "done_key": "started"},
            )
        try:
            result = await effect()
        except Exception:
            try:
                await store.abandon_once(key, holder=holder)
            except Exception:  # the mark stays started: the operator decides
                log.exception("could not remove the started mark of %r", key)
            raise
        try:
            recorded_now = await store.finish_once(key, holder=holder, result=result)
        except PayloadError as exc:
            raise OutcomeUnknownError(
                f"side effect {key!r} happened but its result cannot be recorded ({exc}); "
                "its mark stays started",
                agent=request.agent,
                seq=request.seq,
                detail={"key": key, "done_key": "started"},
            ) from exc
        if not recorded_now:
            log.warning("the started mark of %r was cleared while its effect ran", key)
        return result


def _source(request: AgentRequest) -> Request:
    """The queued request behind a handler's AgentRequest."""
    source = request._source
    if source is None:
        raise RuntimeError("this AgentRequest was not made by an agent worker")
    return source


#: What a step that waited for its resource ("slot" or "rate") until complete_by
#: notes: the error's type and message.
_HELD_BACK = {
    "slot": ("CapacityFull", "every slot of resource {resource!r} stayed taken until complete_by"),
    "rate": (
        "RateLimited",
        "no call to resource {resource!r} was allowed by its rate before complete_by",
    ),
}


async def _traced(handling: Awaitable[None], request: Request) -> None:
    """Run `handling` inside the request's step span (`shepherd.tracing`)."""
    with tracing.step_span(request):
        await handling


def _told(body: JsonValue) -> str:
    """An error reply's reason for its step span: its type and message."""
    if isinstance(body, dict):
        return f"{body.get('type')}: {body.get('message')}"
    return str(body)


def _holder(worker: str, request: Request) -> str:
    """The holder of a handling's capacity slot: unique to one handling of one request."""
    return f"{worker}:{request.id}:{request.attempt}"


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None
