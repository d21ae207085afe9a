"""The connection's thread: every use of the SQLite connection, one at a time, off the event loop.

Calls (reads, opening, closing) run in the order they were asked for. Writes
wait in one list; whenever the thread is free it takes every write waiting at
that moment and runs them as one batch (group commit): while a batch commits,
the next one gathers, and the thread starts it without waiting for the event
loop. The loop hands work over through a queue and is woken once per call or
batch (`call_soon_threadsafe`) to settle its callers' futures; a caller that
gave up meanwhile is skipped, its write committed all the same.

Two exceptions to "off the event loop":

- The thread takes a batch only once it holds the writers' turn among
  processes (`write_lock`), so writes made while another process writes join
  that batch rather than the next.
- A lone write of the kinds the store names (a client's submit), awaited when
  nothing else is ready on the loop and the thread is idle, commits on the loop
  itself if the store is free within `LONE_WAIT` (5 ms): the two thread hops it saves
  cost about as much as the commit. While another process writes, it looks for
  the writers' turn there in short steps, its flag raised so that the holder
  lets the turn go at its next commit (`write_lock`); if the turn does not
  come by then, or SQLite's own lock is taken, the write goes to the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Generator, Sequence
from typing import Any, Generic, Protocol, TypeVar, final

from shepherd.store.group_commit import Pending, fail, settle
from shepherd.store.ops import Write

__all__ = ["LONE_WAIT", "AfterCommit", "BatchRunner", "ConnectionThread", "LoneDone", "Turn"]

#: The longest a lone write on the loop looks for the writers' turn (s): a busy
#: worker's transaction, and its hand-over.
LONE_WAIT = 0.005
#: A lone write's transaction on the loop slower than this (s), its wait for the turn apart...
LONE_SLOW = 0.005
#: ...sends lone writes to the thread for this long (s).
LONE_PAUSE = 1.0

#: What a job on the thread leaves to be done once the thread is free: tell the loop.
Posting = Callable[[], None] | None

# The most callbacks looked through to see that none but cancelled ones are ready.
_READY_SCAN = 8

T = TypeVar("T")
R = TypeVar("R")

#: Runs writes in one transaction, on the thread: one outcome per write, and the channels to ring.
BatchRunner = Callable[[Sequence[Write[Any]]], tuple[list[object], set[str]]]


class Turn(Protocol):
    """The writers' turn among processes (`write_lock.WriteLock`)."""

    def acquire(self, *, wait: bool = True, linger: bool = False) -> bool:
        """Take the turn (waiting for it, or not; after a hand-over, `linger` first); raise if a wait lasts too long."""
        ...

    def release(self) -> None: ...


#: A lone write committed on the loop: its outcomes, the channels to ring, and the
#: seconds it waited for the writers' turn before its transaction began.
LoneDone = tuple[list[object], set[str], float]
#: Runs one lone write on the event loop if the store is free within `LONE_WAIT`:
#: what it did, or None (another writer holds the store; nothing was written).
LoneRunner = Callable[[Sequence[Write[Any]]], LoneDone | None]
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
        turn: The writers' turn among processes: the thread takes its batch
            once it holds it, so writes made while another process writes join it.
        run_lone: Commits a lone write on the loop if the store is free at once.
        lone_kinds: The writes that may be run by `run_lone`.
        before_job: Called on the thread before each call or batch.
    """

    def __init__(
        self,
        run_batch: BatchRunner,
        after_commit: AfterCommit,
        *,
        closed: Callable[[], Exception],
        name: str,
        max_batch: int = 4096,
        turn: Turn | None = None,
        run_lone: LoneRunner | None = None,
        lone_kinds: Collection[type[Write[Any]]] = (),
        before_job: Callable[[], None] | None = None,
    ) -> None:
        self._run_batch = run_batch
        self._turn = turn
        self._run_lone = run_lone
        self._lone_kinds = frozenset(lone_kinds)
        self._before_job = before_job
        # Held by the thread while it runs a job, and by a lone write run on the loop.
        self._busy = threading.Lock()
        # No lone write runs on the loop before this instant (monotonic s): one was slow.
        self._lone_after = 0.0
        # The dispatch of the waiting writes, if it is yet to run.
        self._dispatching: asyncio.Handle | None = None
        #: Writes run on the loop.
        self.lone = 0
        self._after_commit = after_commit
        self._closed = closed
        self._max_batch = max_batch
        # Jobs in order; None stops the thread.
        self._jobs: queue.SimpleQueue[Callable[[], Posting] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._writes: list[Pending] = []
        # Writes of the batch the thread runs (set and cleared on the thread).
        self._in_flight = 0
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

    def write(self, op: Write[R]) -> Awaitable[R]:
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
        self._dispatching = loop.call_soon(self._dispatch, loop)
        if self._run_lone is None or type(op) not in self._lone_kinds:
            return future
        return _MaybeLone(self, future)

    def backlog(self) -> int:
        """Writes waiting or in flight (read without the lock: a count, near enough)."""
        return len(self._writes) + self._in_flight

    def shutdown(self, *, wait: bool) -> None:
        """Stop after the work already queued; later calls and writes fail with `closed`."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self._jobs.put(None)
        if wait and threading.current_thread() is not self._thread:
            self._thread.join()

    # -- on the loop: a lone write ------------------------------------------------
    def _awaited(self, loop: asyncio.AbstractEventLoop) -> None:
        """A write is awaited: if it is the only thing left to do, run it now, on the loop.

        Every write of this turn of the loop has been made by then, and nothing
        else is ready: no write could join its batch, so the turn it would
        wait for to gather them is skipped as well.
        """
        handle = self._dispatching
        if handle is not None and self._free(loop, handle):
            handle.cancel()
            self._dispatching = None
            self._lone_or_thread()

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        """One turn after the first waiting write: run it here if it is lone, else on the thread."""
        self._dispatching = None
        if self._free(loop, None):
            self._lone_or_thread()
        else:
            self._jobs.put(self._drain)

    def _free(self, loop: asyncio.AbstractEventLoop, handle: asyncio.Handle | None) -> bool:
        """Whether nothing but `handle` is ready on the loop, and lone writes are not paused."""
        if self._run_lone is None or time.monotonic() < self._lone_after:
            return False
        # Only asyncio's own loop shows what is ready; with another, the thread writes.
        ready = getattr(loop, "_ready", None)
        if ready is None:
            return False
        # Dispatches of lone writes already run stay there, cancelled, until the next turn.
        return len(ready) <= _READY_SCAN and all(h is handle or h.cancelled() for h in ready)

    def _lone_or_thread(self) -> None:
        """Commit the waiting write on the loop if it is lone and nothing else uses the store.

        A lone write that finds no other write waiting, no call queued, the
        thread idle and the store free within `LONE_WAIT` commits on the loop:
        two thread hops cost about as much as the commit itself. It blocks the
        loop for that wait and one commit; a transaction slower than
        `LONE_SLOW` (a slow disk, a checkpoint) sends lone writes to the
        thread for the next `LONE_PAUSE` s. A look in vain does not: the
        write goes on waiting on the thread, and the next one looks again.
        """
        done = False
        if self._busy.acquire(blocking=False):
            try:
                with self._lock:
                    batch = self._writes[:] if len(self._writes) == 1 else []
                lone = bool(batch) and type(batch[0].op) in self._lone_kinds and self._jobs.empty()
                done = lone and self._lone(batch)
            finally:
                self._busy.release()
        if not done:  # not lone after all, or the store was busy: the thread's
            self._jobs.put(self._drain)

    def _lone(self, batch: list[Pending]) -> bool:
        """Run `batch` (one write) on the loop; False if the store was busy (nothing written)."""
        assert self._run_lone is not None
        began = time.monotonic()
        done: LoneDone | Exception | None
        try:
            done = self._run_lone([p.op for p in batch])
        except Exception as exc:  # the caller's to see, as from the thread
            done = exc
        # Its wait for the turn apart: a look in vain goes on on the thread, and
        # pausing lone writes for it would send the next submits through two hops.
        waited = done[2] if isinstance(done, tuple) else 0.0
        if done is not None and time.monotonic() - began - waited > LONE_SLOW:
            self._lone_after = time.monotonic() + LONE_PAUSE
        if done is None:
            return False
        self.lone += 1
        with self._lock:
            del self._writes[: len(batch)]
            if self._writes:
                self._jobs.put(self._drain)
            else:
                self._draining = False
        if isinstance(done, Exception):
            self._fail(batch, done)
            return True
        try:
            self._settle(batch, done[0], done[1])
        except Exception as exc:  # committed: the caller must not see a failed wake-up
            batch[0].future.get_loop().call_exception_handler(
                {"message": "announcing a lone write's commit failed", "exception": exc}
            )
        return True

    # -- on the thread -------------------------------------------------------
    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            with self._busy:
                if self._before_job is not None:
                    self._before_job()
                post = job()
            # The loop hears of it once the thread is free (and the turn let go):
            # its next write may then commit on the loop.
            if post is not None:
                post()
        # Stopped: no call can be queued any more; writes still waiting cannot run.
        with self._lock:
            left, self._writes = self._writes, []
        if left:
            _post(left, self._fail, left, self._closed())

    def _drain(self) -> Posting:
        """Run one batch of the waiting writes; the next one queues behind calls asked meanwhile.

        The batch is taken once the writers' turn is this process's: writes
        that arrive while another process writes join it. If the turn does
        not come in time (`Turn.acquire` raises), the batch fails with that error.
        """
        turn = self._turn
        refused: Exception | None = None
        post: Posting
        if turn is not None:
            with self._lock:  # a batch of submits only is a client's: it does not linger
                linger = any(type(p.op) not in self._lone_kinds for p in self._writes)
            try:
                turn.acquire(linger=linger)
            except Exception as exc:  # the turn did not come in time: this batch fails
                refused = exc
        try:
            with self._lock:
                batch = self._writes[: self._max_batch]
                del self._writes[: self._max_batch]
            if refused is not None:
                post = (
                    functools.partial(_post, batch, self._fail, batch, refused) if batch else None
                )
            else:
                post = self._run(batch) if batch else None
        finally:
            if turn is not None and refused is None:
                turn.release()
        with self._lock:
            if self._writes:
                self._jobs.put(self._drain)
            else:
                self._draining = False
        return post

    def _run(self, batch: list[Pending]) -> Posting:
        self._in_flight = len(batch)
        try:
            outcomes, rings = self._run_batch([p.op for p in batch])
        except BaseException as exc:  # the whole batch failed: tell every caller
            return functools.partial(_post, batch, self._fail, batch, exc)
        finally:
            self._in_flight = 0
        return functools.partial(_post, batch, self._settle, batch, outcomes, rings)

    # -- on the loop -----------------------------------------------------------
    def _settle(self, batch: list[Pending], outcomes: list[object], rings: set[str]) -> None:
        try:
            self._after_commit(rings)
        finally:  # committed: its callers learn it whatever the wake-ups did
            settle(batch, outcomes)

    @staticmethod
    def _fail(batch: list[Pending], error: BaseException) -> None:
        fail(batch, error)


@final
class _MaybeLone(Generic[R]):
    """A write's outcome; awaited while it is the only thing to do, it commits on the loop."""

    __slots__ = ("_future", "_thread")

    def __init__(self, thread: ConnectionThread, future: asyncio.Future[R]) -> None:
        self._thread = thread
        self._future = future

    def __await__(self) -> Generator[Any, None, R]:
        if not self._future.done():
            self._thread._awaited(self._future.get_loop())
        return (yield from self._future.__await__())


def _settle_call(fn: Callable[[], Any], future: asyncio.Future[Any]) -> Posting:
    """Run a call on the thread; what settles its future on the loop."""
    try:
        result = fn()
    except BaseException as exc:  # the caller's to see, as with an executor
        return functools.partial(_post_to, future.get_loop(), _set_exception, future, exc)
    return functools.partial(_post_to, future.get_loop(), _set_result, future, result)


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
