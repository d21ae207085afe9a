"""Threads for the handlers of `threads=True` agents: blocking code off the event loop.

A thread cannot be stopped. At `complete_by` the agent worker stops waiting for
it (the step times out, as for any handler), but the request keeps its slot
until the thread returns, so that a worker never runs more blocking threads than
`agent_threads`. The threads are daemons, started on demand and ended after a
minute idle: a stuck one does not keep the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, final

from shepherd.errors import ConfigError, TransientError
from shepherd.tasklog import request_fields

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.agents.request import AgentRequest
    from shepherd.core.records import JsonValue, Request
    from shepherd.metrics import Metrics

__all__ = ["HandlerThreads", "ThreadedCalls", "check_handler"]

log = logging.getLogger("shepherd.agent")

_T = TypeVar("_T")

#: Seconds an idle thread waits for work before it ends.
IDLE_TIMEOUT = 60.0


def check_handler(name: str, fn: object, *, threads: bool) -> None:
    """Refuse a handler of the wrong colour: a plain def needs `threads=True`, an async one not.

    Raises:
        ConfigError: Naming the agent and what to change.
    """
    is_async = _is_async(fn)
    if threads and is_async:
        raise ConfigError(
            "threads",
            f"agent {name!r}: a threads=True handler is run in a thread, so it must be a plain "
            "`def`, not an `async def` (drop threads=True to run it on the event loop)",
        )
    if not threads and not is_async:
        raise ConfigError(
            "threads",
            f"agent {name!r}: the handler is not an `async def`; pass threads=True to run a "
            "plain (blocking) function in a thread",
        )


def _is_async(fn: object) -> bool:
    """Whether calling `fn` makes a coroutine: an async def (or partial of one), or an
    object whose `__call__` is one."""
    if inspect.iscoroutinefunction(fn):
        return True
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(type(fn).__call__)


@final
@dataclass(slots=True, kw_only=True)
class _Job:
    fn: Callable[[AgentRequest], JsonValue]
    request: AgentRequest
    loop: asyncio.AbstractEventLoop
    #: Settled on the loop when the thread returns.
    done: asyncio.Future[JsonValue]
    context: contextvars.Context = field(default_factory=contextvars.copy_context)

    def run(self, finished: Callable[[], None]) -> None:
        """Run the handler in this thread, call `finished`, hand the outcome to the loop.

        `finished` runs first, so that whoever the outcome wakes finds this thread free.
        """
        try:
            result = self.context.run(self.fn, self.request)
        except BaseException as exc:  # the awaiting side decides what it means
            finished()
            self._hand_over(_fail, exc)
        else:
            finished()
            self._hand_over(_succeed, result)

    def _hand_over(
        self, settle: Callable[[asyncio.Future[JsonValue], _T], None], value: _T
    ) -> None:
        # A closed loop (RuntimeError) has nobody waiting for the outcome any more.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(settle, self.done, value)


def _succeed(done: asyncio.Future[JsonValue], result: JsonValue) -> None:
    if not done.done():
        done.set_result(result)


def _fail(done: asyncio.Future[JsonValue], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)


@final
class HandlerThreads:
    """Daemon threads for one agent worker's blocking handlers, made as needed.

    The worker bounds how many handlers run at once; this pool starts a thread
    whenever every thread it has is busy, so a handler never waits for one.
    """

    def __init__(self, *, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.idle_timeout = idle_timeout
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        #: Jobs handed to threads and not finished yet.
        self._load = 0
        self._started = 0

    def statistics(self) -> dict[str, int]:
        """Threads alive, jobs running, threads ever started."""
        with self._lock:
            return {"threads": self._threads, "running": self._load, "started": self._started}

    def start(
        self, fn: Callable[[AgentRequest], JsonValue], request: AgentRequest
    ) -> asyncio.Future[JsonValue]:
        """Run `fn(request)` in a thread; the future is settled when it returns.

        Call it on the event loop. Cancelling the future does not stop the thread.

        Raises:
            TransientError: No thread could be started (the process is out of them).
        """
        loop = asyncio.get_running_loop()
        job = _Job(fn=fn, request=request, loop=loop, done=loop.create_future())
        with self._lock:
            self._load += 1
            spawn = self._load > self._threads
            if spawn:
                self._threads += 1
                self._started += 1
                number = self._started
        if spawn:
            thread = threading.Thread(
                target=self._work, name=f"shepherd-handler-{number}", daemon=True
            )
            try:
                thread.start()
            except RuntimeError as exc:
                with self._lock:
                    self._threads -= 1
                    self._load -= 1
                raise TransientError(f"could not start a handler thread: {exc}") from exc
        self._queue.put(job)
        return job.done

    def close(self) -> None:
        """Let every thread end once it is idle (a busy one ends when it returns)."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=self.idle_timeout)
            except queue.Empty:
                with self._lock:
                    if self._load < self._threads:  # more threads than work: end this one
                        self._threads -= 1
                        return
                continue
            if job is None:
                with self._lock:
                    self._threads -= 1
                return
            job.run(self._finished)

    def _finished(self) -> None:
        with self._lock:
            self._load -= 1


@final
class ThreadedCalls:
    """One agent worker's side of its `threads=True` handlers.

    It counts the requests of threaded agents in flight (at most `limit`, the
    worker's `agent_threads`) and keeps each one's slot until its thread returns.
    """

    def __init__(self, *, limit: int, metrics: Metrics) -> None:
        self.limit = limit
        self.metrics = metrics
        self.pool = HandlerThreads()
        #: The handling of each request of a threaded agent, until its thread returns.
        self.holding: set[asyncio.Task[None]] = set()
        #: The outcome of the thread running each request's handler, by queue id.
        self._threads: dict[int, asyncio.Future[JsonValue]] = {}

    @property
    def free(self) -> int:
        """How many more requests of threaded agents the worker may take now."""
        return self.limit - len(self.holding)

    async def call(
        self, fn: Callable[[AgentRequest], JsonValue], call: AgentRequest, request: Request
    ) -> JsonValue:
        """Run the handler in a thread and await it; a cancelled await leaves it running."""
        done = self.pool.start(fn, call)
        self._threads[request.id] = done
        return await asyncio.shield(done)

    def overdue(self, request: Request) -> bool:
        """At complete_by: if the request's thread still runs, say so (once) and count it."""
        done = self._threads.get(request.id)
        if done is None or done.done():
            return False
        self.metrics.threads_overdue.labels(agent=request.agent).inc()
        log.warning(
            "%s %s/%s: handler thread still running at complete_by; the step is given up, "
            "but a thread cannot be stopped: it keeps its slot until it returns",
            request.agent,
            request.task_id,
            request.seq,
            extra=request_fields(request),
        )
        return True

    async def hold(self, handling: Awaitable[None], request: Request) -> None:
        """Await `handling` (of `request`); then, past complete_by too, its thread.

        When the worker stops (cancellation) nothing waits: the thread is a daemon.
        """
        stopping = False
        try:
            await handling
        except asyncio.CancelledError:
            stopping = True
            raise
        finally:
            done = self._threads.pop(request.id, None)
            if done is not None and not stopping and not done.done():
                await self._returned(done, request)

    async def _returned(self, done: asyncio.Future[JsonValue], request: Request) -> None:
        loop = asyncio.get_running_loop()
        since = loop.time()
        try:
            await done
        except asyncio.CancelledError:
            raise
        except BaseException:  # the step was given up: its outcome no longer counts
            pass
        log.info(
            "%s %s/%s: handler thread returned %.1f s after complete_by; its outcome was "
            "discarded, its slot is free",
            request.agent,
            request.task_id,
            request.seq,
            loop.time() - since,
            extra=request_fields(request),
        )

    def close(self) -> None:
        """Let the idle threads end (busy ones end when their handler returns)."""
        running = self.pool.statistics()["running"]
        if running:
            log.info(
                "%d handler threads still running as the agent worker stops; they end "
                "with the process, their steps unanswered",
                running,
            )
        self.pool.close()
