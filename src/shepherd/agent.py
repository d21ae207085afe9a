"""The Agent role: take requests, run handlers under `complete_by`, reply.

A handler wraps one remote service. Transient failures are retried with
exponential backoff and jitter inside the deadline; permanent ones are replied
as errors; at `complete_by` the handler is cancelled and nothing is replied
(someone else may already be retrying the step).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, final

from shepherd.core.records import JsonValue, Request
from shepherd.core.retry import RetryPolicy, next_retry
from shepherd.errors import PermanentError, TransientError
from shepherd.store import signals as ch
from shepherd.store.signals import Signals

if TYPE_CHECKING:
    from shepherd.app import App

log = logging.getLogger("shepherd.agent")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRequest:
    """What a handler receives."""

    payload: JsonValue
    #: `task_id/seq`: the same for every execution of one step; pass it to the service.
    idempotency_key: str
    #: How many times this step has been sent to an agent (1 on the first send).
    attempt: int
    #: Retries of this attempt inside the agent so far (0 on the first try).
    retry: int
    complete_by: datetime
    task_id: str
    seq: int
    agent: str


Handler = Callable[[AgentRequest], Awaitable[JsonValue]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """A registered agent: its handler and its policies."""

    name: str
    fn: Handler
    retry: RetryPolicy
    #: Default step window for calls to this agent (seconds), or the app default.
    within: float | None = None


def is_transient(exc: BaseException) -> bool:
    """Whether a handler's exception is worth retrying.

    TransientError, timeouts and connection errors are; so are httpx transport
    errors and HTTP 429/502/503/504. Anything else is permanent: a bug or a
    refusal does not fix itself by asking again.
    """
    if isinstance(exc, TransientError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, PermanentError):
        return False
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency
        return False
    if isinstance(exc, httpx.TransportError):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in (429, 502, 503, 504)
    return False


def error_body(exc: BaseException) -> dict[str, Any]:
    """The JSON error replied for a permanent failure."""
    body: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    detail = getattr(exc, "detail", None)
    if detail is not None:
        body["detail"] = detail
    return body


@final
class AgentWorker:
    """Hosts agents: leases their requests, runs handlers concurrently, replies."""

    def __init__(self, app: App, *, worker: str, agents: list[Agent] | None = None) -> None:
        self.app = app
        self.store = app.store
        self.worker = worker
        self.agents = {a.name: a for a in (agents if agents is not None else app.agents.values())}
        self.concurrency = app.settings.agent_concurrency
        self.rng = random.Random()
        self._running: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self.calls = 0
        self.retries = 0
        self.timeouts = 0
        self.replied = 0

    def statistics(self) -> dict[str, int]:
        return {
            "running": len(self._running),
            "calls": self.calls,
            "retries": self.retries,
            "timeouts": self.timeouts,
            "replied": self.replied,
        }

    async def run(self) -> None:
        """Take and handle requests until cancelled."""
        if not self.agents:
            await asyncio.Event().wait()
        names = sorted(self.agents)
        signals: Signals = self.store.signals
        try:
            while True:
                free = self.concurrency - len(self._running)
                if free <= 0:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
                    continue
                wake = signals.event(ch.REQUESTS)
                requests = await self.store.take_requests(
                    agents=names, worker=self.worker, limit=free
                )
                for request in requests:
                    task = asyncio.create_task(self._handle(request))
                    self._running.add(task)
                    task.add_done_callback(self._done)
                if len(requests) < free:
                    await Signals.wait(wake, self.app.settings.poll_interval)
        finally:
            for task in list(self._running):
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slot_freed.set()
        if not task.cancelled() and task.exception() is not None:
            log.error("agent worker failure", exc_info=task.exception())

    async def _handle(self, request: Request) -> None:
        spec = self.agents[request.agent]
        clock = self.app.clock
        remaining = (request.complete_by - self.store.now()).total_seconds()
        if remaining <= 0:
            return
        deadline = clock.monotonic() + remaining
        retry = 0
        while True:
            self.calls += 1
            call = AgentRequest(
                payload=request.payload,
                idempotency_key=f"{request.task_id}/{request.seq}",
                attempt=request.attempt,
                retry=retry,
                complete_by=request.complete_by,
                task_id=request.task_id,
                seq=request.seq,
                agent=request.agent,
            )
            try:
                async with asyncio.timeout(deadline - clock.monotonic()) as scope:
                    result = await spec.fn(call)
            except TimeoutError as exc:
                if scope.expired():
                    self.timeouts += 1
                    log.info(
                        "%s %s/%s: cancelled at complete_by",
                        request.agent,
                        request.task_id,
                        request.seq,
                    )
                    await self._note(request, "step_timed_out", tries=retry + 1, error=None)
                    return  # past complete_by: reply nothing
                failure: BaseException = exc
            except Exception as exc:
                failure = exc
            else:
                await self._reply(request, ok=True, body=result)
                return
            if not is_transient(failure):
                await self._reply(request, ok=False, body=error_body(failure))
                return
            retry += 1
            delay = next_retry(
                spec.retry,
                retry,
                self.rng,
                now=self.store.now(),
                complete_by=request.complete_by,
                retry_after=_retry_after(failure),
            )
            if delay is None:
                # Out of tries or time: say nothing; the supervisor sees complete_by pass.
                log.warning(
                    "%s %s/%s: giving up after %d tries: %s",
                    request.agent,
                    request.task_id,
                    request.seq,
                    retry,
                    failure,
                )
                await self._note(request, "step_gave_up", tries=retry, error=error_body(failure))
                return
            self.retries += 1
            await asyncio.sleep(delay)

    async def _note(self, request: Request, kind: str, *, tries: int, error: JsonValue) -> None:
        """Leave the reason in the task's history, for the operator and the alert."""
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
            log.exception("could not record %s for %s/%s", kind, request.task_id, request.seq)

    async def _reply(self, request: Request, *, ok: bool, body: JsonValue) -> None:
        if await self.store.reply_and_ack(request, worker=self.worker, ok=ok, body=body):
            self.replied += 1


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None
