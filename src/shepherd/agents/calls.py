"""The agent role's side of durable calls (`app.call`): take calls, run handlers, answer.

A call is taken for one handling at a time (`store.take_calls`): its handler
runs until the call's `complete_by` (`within` after it was taken), retrying
transient failures and bugs by the agent's retry policy inside that window.
The first outcome is the answer: a result, a permanent error, or a bug out of
tries. A handling that reaches `complete_by` without an outcome answers
nothing: the call is taken again by any process (after the fallback poll at
the latest), and a call handled `max_attempts` times without an answer is
answered with an error by the store and reported here as an alert.

A handling passes the same gates as a step's, shared with the agent worker
of its process (`shepherd.agents.gates`): a capacity slot of the agent's
resource (its `resource=`, else its call's entity's), the service's circuit
breaker and the resource's rate before each try. An open breaker answers the
call at once with a `BreakerOpenError` (its caller is not held for the
cool-down, as a step is); a slot or a token not had by `complete_by` ends the
handling without an answer, like any overrun. Handlers of `threads=True`
agents run in a thread of their own.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, cast, final

from shepherd.agents.request import AgentRequest
from shepherd.core.batching import BATCH_ERROR
from shepherd.core.handling import (
    GiveUp,
    Handling,
    Phase,
    ReplyError,
    ReplyResult,
    Retry,
    TimedOut,
    begin,
)
from shepherd.errors import StoreUnavailableError
from shepherd.failures import bug_body, classify, error_body
from shepherd.idle import IdleBackoff
from shepherd.outage import Outage
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent, BlockingHandler, Handler
    from shepherd.agents.gates import Gates
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.handling import Next
    from shepherd.core.records import CallRequest, JsonValue
    from shepherd.registry import Standing
    from shepherd.store.roles import CallStore, Clocked

__all__ = ["CallServer", "call_request", "handle_batch", "handle_call"]

log = logging.getLogger("shepherd.agents.calls")

#: Told of every call the store gave up (its handlings never answered).
GaveUp = Callable[["CallRequest"], None]


@final
class CallServer:
    """Serves the calls of the agents it hosts, as part of the agent role.

    Args:
        store: The store, as a call server uses it.
        worker: This handler's name in the calls it takes.
        agents: The agents it serves, by name.
        settings: Its concurrency (`agent_concurrency`) and polling.
        clock: What deadlines, retry waits and polling run on.
        gave_up: Told of each call given up (the App alerts an operator).
        gates: The governance of its process's agent worker (breakers, rates, slots).
    """

    def __init__(
        self,
        store: CallStore,
        *,
        worker: str,
        agents: Mapping[str, Agent],
        settings: Settings,
        clock: Clock,
        gave_up: GaveUp,
        gates: Gates,
    ) -> None:
        self.store = store
        self.gates = gates
        self.worker = worker
        self.agents = dict(agents)
        self.settings = settings
        self.clock = clock
        self.gave_up = gave_up
        self.rng = random.Random()
        self.answered = 0
        self._running: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()
        self.takes_outage = Outage("calls taken", log=log, clock=clock, watch=store.watch)
        #: Whether this process may take calls (its heartbeats reach the store); None: always.
        self.standing: Standing | None = None

    def statistics(self) -> dict[str, int]:
        return {"calls_running": len(self._running), "calls_answered": self.answered}

    async def run(self) -> None:
        """Take and handle calls until cancelled."""
        if not self.agents:
            await asyncio.Event().wait()
        names = sorted(self.agents)
        limit = self.settings.agent_concurrency
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        try:
            while True:
                free = limit - len(self._running)
                if free <= 0:
                    self._freed.clear()
                    await self._freed.wait()
                    continue
                if self.standing is not None and not self.standing.takes_work():
                    await self.standing.wait_takes_work()
                    continue
                wake = self.store.signals.event(ch.CALLS)
                try:
                    taken, given_up = await self.store.take_calls(
                        worker=self.worker, agents=names, limit=free
                    )
                except StoreUnavailableError as exc:  # wait it out; anything else stops us
                    await self.takes_outage.pause(exc)
                    continue
                self.takes_outage.over()
                for call in given_up:
                    log.error(
                        "call %s to %s given up after %d handlings without an answer",
                        call.call_id,
                        call.agent,
                        call.attempt,
                    )
                    self.gave_up(call)
                for call in taken:
                    task = asyncio.create_task(self._handle(call))
                    self._running.add(task)
                    task.add_done_callback(self._done)
                wait = backoff.next(found=bool(taken or given_up))
                if len(taken) < free:
                    await self.clock.wait_event(wake, wait)
        finally:
            for task in list(self._running):
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("a call's handling failed", exc_info=task.exception())

    async def _handle(self, call: CallRequest) -> None:
        spec = self.agents[call.agent]
        answer = await handle_call(
            spec,
            call_request(call),
            call,
            gates=self.gates,
            clock=self.clock,
            store=self.store,
            rng=self.rng,
        )
        if answer is None:
            return  # out of tries or time inside the window: the call is handed on
        try:
            if await self.store.answer_call(
                call.call_id, worker=self.worker, attempt=call.attempt, ok=answer[0], body=answer[1]
            ):
                self.answered += 1
        except StoreUnavailableError as exc:
            log.warning(
                "call %s: its answer could not be stored (%s); it will be handed on",
                call.call_id,
                exc,
            )


def call_request(call: CallRequest) -> AgentRequest:
    """What a handler of `call` receives (its task id is the call's id, its seq 0)."""
    return AgentRequest(
        payload=call.payload,
        idempotency_key=call.call_id,
        attempt=call.attempt,
        retry=0,
        complete_by=call.complete_by,
        task_id=call.call_id,
        seq=0,
        agent=call.agent,
        within=call.within,
        resolution=call.resolution,
        reminder=call.reminder,
        reminder_at=call.reminder_at,
    )


async def handle_call(
    spec: Agent,
    request: AgentRequest,
    call: CallRequest,
    *,
    gates: Gates,
    clock: Clock,
    store: Clocked,
    rng: random.Random,
) -> tuple[bool, JsonValue] | None:
    """Run one governed handling of `call` until its `complete_by`; its answer, or None.

    It passes the gates a step's handling passes, in the same order
    (`shepherd.core.handling`): a slot of the agent's resource (its own
    `resource=`, else the resource of the call's entity), then before each try
    the service's circuit breaker and a rate token of the resource. Transient
    failures and bugs are retried by the agent's retry policy inside the
    window; the first result, permanent error, or bug out of tries is the
    answer. An open breaker answers at once (`BreakerOpenError`): the caller
    waits on nothing. None when the window passed or the tries ran out without
    an answer (the call is handed on).
    """

    async def one() -> list[JsonValue]:
        return [await _run(spec, request)]

    label = f"call {call.call_id} to {call.agent}"
    answers = await _handle(
        spec, one, [request], [call], label, gates=gates, clock=clock, store=store, rng=rng
    )
    return None if answers is None else answers[0]


async def handle_batch(
    spec: Agent,
    requests: list[AgentRequest],
    calls: list[CallRequest],
    *,
    gates: Gates,
    clock: Clock,
    store: Clocked,
    rng: random.Random,
) -> list[tuple[bool, JsonValue]] | None:
    """Run one governed handling of a batch of calls until the earliest `complete_by` among them.

    The handler gets the list of requests and must return a list of as many
    results, in order: each is its call's answer. A list of another length, or
    something else, answers every call with a `BatchError` naming the agent
    (a bug: no caller's call is left without an answer). A batch is one use of
    the resource: one slot, one rate token per try. An exception answers every
    call as `handle_call` answers one; None when the window passed or the tries
    ran out without an answer.
    """

    async def many() -> list[JsonValue]:
        results = await _run_batch(spec, requests)
        if not isinstance(results, list) or len(results) != len(calls):
            got = (
                f"a list of {len(results)}" if isinstance(results, list) else type(results).__name__
            )
            raise _BrokenBatchError(
                f"{spec.name}: the batch handler returned {got} for {len(calls)} requests; "
                "it must return one result per request, in order"
            )
        return results

    label = f"batch of {len(calls)} calls to {spec.name}"
    return await _handle(
        spec, many, requests, calls, label, gates=gates, clock=clock, store=store, rng=rng
    )


class _BrokenBatchError(Exception):
    """A batch handler's result is not one result per request: every call's answer says so."""


async def _handle(
    spec: Agent,
    run: Callable[[], Awaitable[list[JsonValue]]],
    requests: list[AgentRequest],
    calls: list[CallRequest],
    label: str,
    *,
    gates: Gates,
    clock: Clock,
    store: Clocked,
    rng: random.Random,
) -> list[tuple[bool, JsonValue]] | None:
    """One governed handling of `calls` by `run` inside the earliest deadline; their answers.

    `core.handling` decides each next thing, as for a step; the slot taken is
    given back as the handling ends (the answer is written after).
    """
    deadline = min(c.complete_by for c in calls)
    now = store.now()
    resource = spec.resource_of(calls[0])
    handling = begin(
        complete_by=deadline,
        now=now,
        retry=None,
        policy=spec.retry,
        resource=resource,
        service=None if spec.breaker is None else spec.service_name,
    )
    if not isinstance(handling, Handling):
        return None  # its window has passed already: it is handed on
    first = calls[0]
    holder = f"{gates.capacity.worker}:call:{first.call_id}:{first.attempt}"
    results: list[JsonValue] = []
    decision: Next = handling.start()
    try:
        async with clock.deadline(deadline, now=now) as scope:
            while True:
                if decision is Phase.TRY:
                    try:
                        results = await run()
                    except _BrokenBatchError as broken:
                        log.error("%s", broken)
                        body: JsonValue = {"type": BATCH_ERROR, "message": str(broken), "bug": True}
                        return [(False, body)] * len(calls)
                    except Exception as exc:
                        kind = classify(exc)
                        decision = handling.failed(
                            exc,
                            kind,
                            retry_after=_retry_after(exc),
                            now=store.now(),
                            complete_by=deadline,
                            rng=rng,
                        )
                        if kind == "bug":
                            _log_bug(
                                label, handling.tries, exc, last=not isinstance(decision, Retry)
                            )
                    else:
                        decision = handling.succeeded()
                        break
                elif isinstance(decision, Phase):  # a gate: a slot, the breaker, a token
                    decision = await gates.next(
                        decision,
                        handling,
                        spec,
                        resource=resource,
                        holder=holder,
                        fail_fast=True,  # a caller waits on no open breaker
                        now=store.now,
                        complete_by=deadline,
                        rng=rng,
                    )
                elif isinstance(decision, Retry):
                    for request in requests:
                        request.retry = handling.retries
                    await clock.sleep(decision.delay)
                    decision = handling.slept()
                else:
                    break
    except TimeoutError:
        if not scope.expired():
            raise
        decision = handling.expired()
    finally:
        slot = gates.capacity.held(holder)
        if slot is not None:
            await gates.capacity.release(slot)
    return await _answers(decision, results, spec, len(calls), label, gates=gates)


async def _answers(
    end: Next, results: list[JsonValue], spec: Agent, n: int, label: str, *, gates: Gates
) -> list[tuple[bool, JsonValue]] | None:
    """What the `n` calls of a handling that ended in `end` are answered; None: handed on."""
    if isinstance(end, ReplyResult):
        if end.answered:
            await gates.breakers.after_call(spec, failed=False)
        return [(True, result) for result in results]
    if isinstance(end, ReplyError):
        if end.answered:  # the service answered (a refusal too): not a breaker failure
            await gates.breakers.after_call(spec, failed=False)
        body = bug_body(end.error, tries=end.tries) if end.bug else error_body(end.error)
        return [(False, body)] * n
    if isinstance(end, GiveUp):
        log.warning("%s: giving up this handling after %d tries: %s", label, end.tries, end.error)
    elif isinstance(end, TimedOut):
        if end.hung:
            await gates.breakers.after_call(spec, failed=True)
        why = end.held_back["message"] if end.held_back is not None else "a try was cut"
        log.warning(
            "%s: the handling reached its deadline (%s); it will be taken again", label, why
        )
    return None


def _log_bug(label: str, tries: int, exc: BaseException, *, last: bool) -> None:
    if last:
        log.error(
            "%s: unexpected %s: %s; answered as a bug after %d tries",
            label,
            type(exc).__name__,
            exc,
            tries,
            exc_info=exc,
        )
    else:
        log.warning("%s: unexpected %s: %s; retried", label, type(exc).__name__, exc)


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None


async def _run_batch(spec: Agent, requests: list[AgentRequest]) -> JsonValue:
    if spec.threads:
        fn = cast("Callable[[list[AgentRequest]], JsonValue]", spec.fn)
        return await asyncio.to_thread(fn, requests)
    handler = cast("Callable[[list[AgentRequest]], Awaitable[JsonValue]]", spec.fn)
    return await handler(requests)


async def _run(spec: Agent, request: AgentRequest) -> JsonValue:
    if spec.threads:
        fn = cast("BlockingHandler", spec.fn)
        return await asyncio.to_thread(fn, request)
    return await cast("Handler", spec.fn)(request)
