"""The connection's thread: every use of the SQLite connection, one at a time, off the event loop.

Calls (reads, opening, closing) run in the order they were asked for. Writes
wait in one list; whenever the thread is free it takes every write waiting at
that moment and runs them as one batch (group commit): while a batch commits,
the next one gathers, and the thread starts it without waiting for the event
loop. The loop hands work over through a queue and is woken once per call or
batch (`call_soon_threadsafe`) to settle its callers' futures; a caller that
gave up meanwhile is skipped, its write committed all the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, final

from shepherd.store.group_commit import Pending
from shepherd.store.ops import Write

__all__ = ["AfterCommit", "BatchRunner", "ConnectionThread"]

T = TypeVar("T")
R = TypeVar("R")

#: Runs writes in one transaction, on the thread: one outcome per write, and the channels to ring.
BatchRunner = Callable[[Sequence[Write[Any]]], tuple[list[object], set[str]]]
#: Called on the event loop once a batch has committed, with the channels it rings.
AfterCommit = Callable[[set[str]], None]


@final
class ConnectionThread:
    """One thread that owns the connection: calls in order, writes in group commits.

    One event loop uses it (the store's); its futures belong to that loop.

    Args:
        run_batch: Runs one batch of writes (on the thread).
        after_commit: Told (on the loop) what each committed batch rings,
            before its callers' futures are settled.
        closed: The error a caller gets once the thread has stopped.
        name: The thread's name.
        max_batch: The most writes in one transaction.
    """

    def __init__(
        self,
        run_batch: BatchRunner,
        after_commit: AfterCommit,
        *,
        closed: Callable[[], Exception],
        name: str,
        max_batch: int = 4096,
    ) -> None:
        self._run_batch = run_batch
        self._after_commit = after_commit
        self._closed = closed
        self._max_batch = max_batch
        # Jobs in order; None stops the thread.
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._writes: list[Pending] = []
        # True from the first waiting write until the thread finds none left.
        self._draining = False
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """Run `fn` on the thread; its return value or exception, as a future of this loop."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._stopped:
                future.set_exception(self._closed())
            else:
                self._jobs.put(functools.partial(_settle_call, fn, future))
        return future

    def write(self, op: Write[R]) -> asyncio.Future[R]:
        """Queue `op` for the next batch; its outcome once that batch has committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._lock:
            if self._stopped:
                future.set_exception(self._closed())
                return future
            self._writes.append(Pending(op, future))
            if self._draining:  # the thread takes it with the others
                return future
            self._draining = True
        # Not at once: the writes of every coroutine ready in this turn of the
        # loop go into the same batch.
        loop.call_soon(self._jobs.put, self._drain)
        return future

    def shutdown(self, *, wait: bool) -> None:
        """Stop after the work already queued; later calls and writes fail with `closed`."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._jobs.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    # -- on the thread -------------------------------------------------------
    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()
        # Stopped: no call can be queued any more; writes still waiting cannot run.
        with self._lock:
            left, self._writes = self._writes, []
        if left:
            _post(left, self._fail, left, self._closed())

    def _drain(self) -> None:
        """Run one batch of the waiting writes; the next one queues behind calls asked meanwhile."""
        with self._lock:
            batch = self._writes[: self._max_batch]
            del self._writes[: self._max_batch]
        if batch:
            self._run(batch)
        with self._lock:
            if self._writes:
                self._jobs.put(self._drain)
            else:
                self._draining = False

    def _run(self, batch: list[Pending]) -> None:
        try:
            outcomes, rings = self._run_batch([p.op for p in batch])
        except BaseException as exc:  # the whole batch failed: tell every caller
            _post(batch, self._fail, batch, exc)
            return
        _post(batch, self._settle, batch, outcomes, rings)

    # -- on the loop -----------------------------------------------------------
    def _settle(self, batch: list[Pending], outcomes: list[object], rings: set[str]) -> None:
        try:
            self._after_commit(rings)
        finally:  # committed: its callers learn it whatever the wake-ups did
            for pending, outcome in zip(batch, outcomes, strict=True):
                if pending.future.done():  # its caller gave up
                    continue
                if isinstance(outcome, BaseException):
                    pending.future.set_exception(outcome)
                else:
                    pending.future.set_result(outcome)

    @staticmethod
    def _fail(batch: list[Pending], error: BaseException) -> None:
        for pending in batch:
            if not pending.future.done():
                pending.future.set_exception(error)


def _settle_call(fn: Callable[[], Any], future: asyncio.Future[Any]) -> None:
    """Run a call on the thread; settle its future on the loop."""
    try:
        result = fn()
    except BaseException as exc:  # the caller's to see, as with an executor
        _post_to(future.get_loop(), _set_exception, future, exc)
    else:
        _post_to(future.get_loop(), _set_result, future, result)


def _post(batch: list[Pending], fn: Callable[..., None], *args: Any) -> None:
    """Run `fn(*args)` on the loop of the batch's futures."""
    _post_to(batch[0].future.get_loop(), fn, *args)


def _post_to(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    """Run `fn(*args)` on `loop`, unless the loop is gone (nobody waits any more)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _set_result(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():
        future.set_result(result)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
