"""The writers' turn: an advisory lock beside the database, taken around each write transaction.

SQLite's own write lock has no queue: a writer that finds it taken sleeps in
the busy handler (1, 2, 5, 10 ms...) and looks again, however soon the lock
was let go. With a client submitting while a worker writes, most of a
submit's worst cases went in those sleeps. Every shepherd writer therefore
first takes an exclusive `flock` on `<file>-lock`: a writer that must wait is
woken by the kernel the moment the holder lets go. SQLite's lock and busy
timeout stay underneath, for writers that are not shepherd's.

The lock belongs to the open file, so a process that dies lets go of it at
once. A process that is alive but stuck while it holds the turn (stopped, or
its disk hung mid-commit) would hold every other writer up, as it would hold
SQLite's own lock: so a wait is bounded by `timeout` (the store's
`store_timeout`), past which `acquire` raises StoreUnavailableError naming
the setting and the holder's pid. `flock` itself cannot time out: a waiting
thread of the lock's own (`_Waiter`) blocks in it, on a second open file of
the lock, and hands the turn over to the writer that waits for it; a writer
that gave up leaves the wait in place, and the turn, when it comes, is let go
at once unless a writer waits for it again.

The kernel does not hand a released `flock` to its waiter: it wakes it, and a
holder that asks again at once (a worker committing batch after batch) takes
it again before the woken thread has run. So a waiting writer also holds a
shared `flock` on `<file>-wait` (`WaitFlag`) until the turn is its own; a
holder that sees the flag as it lets go gives the waiter the next turn: its
next `acquire` first waits, in short steps, for the flag to clear, at most
`hand_over` seconds (a stopped waiter cannot hold it up longer). Each writer
thus waits for at most the one transaction under way, not for a run of them.
A waiter first looks for the turn itself in the same short steps for `poll`
seconds, which spares the hand-over between threads when the holder's next
commit comes soon; only then does `_Waiter` wait for it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from typing import final

from shepherd.errors import StoreUnavailableError

__all__ = [
    "HAND_OVER",
    "LINGER",
    "POLL",
    "WaitFlag",
    "WriteLock",
    "holder_pid",
    "lock_path",
    "wait_path",
]

log = logging.getLogger("shepherd.store.sqlite")

#: Seconds a writer that let the turn go to a waiter waits for it to be taken.
HAND_OVER = 0.005
#: Seconds a batch writer that handed the turn over waits before it asks for it again.
LINGER = 0.001
#: Seconds a waiting writer looks for the turn itself, in short steps, before a thread waits.
POLL = 0.003
#: Seconds between looks at the waiters' flag while handing the turn over.
_HAND_OVER_STEP = 0.00005


def lock_path(db_path: str) -> str:
    """The lock file of the database at `db_path`."""
    return os.path.realpath(db_path) + "-lock"


def wait_path(db_path: str) -> str:
    """The file whose shared `flock` tells that a writer waits for the turn of `db_path`."""
    return os.path.realpath(db_path) + "-wait"


def holder_pid(fd: int) -> int | None:
    """The pid holding a `flock` on the file open as `fd`, from `/proc/locks` (None if unknown)."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            lines = locks.readlines()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146396 0 EOF" (a waiter's line starts "1: ->")
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
            try:
                return int(fields[4])
            except ValueError:
                return None
    return None


@final
class WriteLock:
    """An exclusive advisory lock on `<file>-lock`, taken and let go once per write transaction.

    Until `open`, and if the lock file cannot be opened (a read-only folder),
    every call does nothing and SQLite's busy handler alone orders the writers.
    One thread at a time waits for it (the store's connection thread).

    Args:
        db_path: The database file.
        timeout: Seconds a wait for the turn may last (`store_timeout`).
        hand_over: Seconds the next `acquire` waits for a writer that was
            waiting when the turn was let go to take it.
        poll: Seconds a writer that must wait looks for the turn itself, in
            short steps, before the lock's thread waits for it (0: at once).
        linger: Seconds an `acquire(linger=True)` that follows a hand-over
            waits before it asks for the turn (0: never).
    """

    def __init__(
        self,
        db_path: str,
        *,
        timeout: float = 5.0,
        hand_over: float = HAND_OVER,
        poll: float = POLL,
        linger: float = LINGER,
    ) -> None:
        self.db_path = db_path
        self.timeout = timeout
        self.hand_over = hand_over
        self.poll = poll
        self.linger = linger
        self._fd: int | None = None
        # The open file the lock is held through now, if it is held.
        self._held: int | None = None
        self._waiter: _Waiter | None = None
        self._flag: WaitFlag | None = None
        # Another writer waited when the turn was last let go: it goes first.
        self._owed = False
        # That writer took the turn, handed over: the next batch may linger.
        self._handed = False
        self.waits = 0
        self.timeouts = 0
        #: Short looks for the turn on the caller's thread (`acquire_within`), and those it came in.
        self.lone_waits = 0
        self.lone_turns = 0
        #: Turns let go to a waiting writer, and those it did not take within `hand_over`.
        self.hand_overs = 0
        self.hand_overs_missed = 0
        #: Waits of `linger` s after a hand-over.
        self.lingers = 0
        #: Seconds spent waiting for the turn (for another process), and holding it.
        self.waited_s = 0.0
        self.held_s = 0.0
        self._since = 0.0

    def open(self) -> None:
        """Open the lock file (creating it); on failure, warn and do without."""
        if self._fd is not None or self.db_path == ":memory:":
            return
        path = lock_path(self.db_path)
        try:
            # Read-only is enough for flock, and lets another user's process share the file.
            self._fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            log.warning(
                "no write lock file %s (%s): writers wait in SQLite's busy handler", path, exc
            )
            return
        try:
            self._flag = WaitFlag(wait_path(self.db_path))
        except OSError as exc:
            log.warning(
                "no waiters' flag %s (%s): the turn is not handed over",
                wait_path(self.db_path),
                exc,
            )

    def acquire(self, *, wait: bool = True, linger: bool = False) -> bool:
        """Take the lock (waiting for it at most `timeout`, or not); whether it is held now.

        With `linger` (a worker's batch, not a client's submit), a writer that
        has just handed the turn over waits `linger` s before it asks again:
        the writer it let in may commit again meanwhile (a client's next
        submit) without waiting for this one, and this writer's next batch
        gathers what its loop wrote meanwhile, so it commits less often.

        Raises:
            StoreUnavailableError: Another process held it for all of `timeout`.
        """
        fd = self._fd
        if fd is None:
            return True
        if self._owed and not self._let_waiter_go_first(
            None if not wait else time.monotonic() + self.hand_over
        ):
            return False
        handed, self._handed = self._handed, False
        if handed and wait and linger and self.linger > 0:
            self.lingers += 1
            time.sleep(self.linger)
        if self._take_now(fd):
            return True
        if not wait:
            return False
        began = time.monotonic()
        try:
            self._wait(fd)
        finally:
            self._since = time.monotonic()
            self.waited_s += self._since - began
        return True

    def acquire_within(self, seconds: float) -> bool:
        """Take the lock if it comes within `seconds`, looking for it on this thread; whether held.

        For a lone write on the event loop: the waiters' flag raised, it looks
        in short steps (no thread of the lock's wakes it, so no hand-over
        between threads holds the turn idle), and the holder lets the turn go
        at its next commit. Past `seconds`, nothing is held and nothing waits.
        """
        fd = self._fd
        if fd is None:
            return True
        began = time.monotonic()
        deadline = began + seconds
        if self._owed and not self._let_waiter_go_first(deadline):
            return False
        self._handed = False  # a lone write never lingers
        if self._take_now(fd):
            return True
        self.lone_waits += 1
        flag = self._flag
        if flag is not None:
            flag.raise_()
        try:
            got = self._poll(fd, deadline)
        finally:
            if flag is not None:
                flag.lower()
        self._since = time.monotonic()
        self.waited_s += self._since - began
        if got:
            self._held = fd
            self.lone_turns += 1
        return got

    def _take_now(self, fd: int) -> bool:
        """Take the lock if it is free now (no wait); whether it was."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._held = fd
        self._since = time.monotonic()
        return True

    def release(self) -> None:
        """Let the lock go (a no-op without a lock file, or when it is not held)."""
        held, self._held = self._held, None
        if held is not None:
            fcntl.flock(held, fcntl.LOCK_UN)
            self.held_s += time.monotonic() - self._since
            flag = self._flag
            self._owed = flag is not None and flag.raised()

    def close(self) -> None:
        """Close the lock file (letting go of the lock, if held) and end the waiting thread."""
        fd, self._fd = self._fd, None
        waiter, self._waiter = self._waiter, None
        flag, self._flag = self._flag, None
        self._held = None
        self._owed = False
        if waiter is not None:
            waiter.close()
        if flag is not None:
            flag.close()
        if fd is not None:
            os.close(fd)

    def _wait(self, fd: int) -> None:
        """Wait for another process to let go, at most `timeout` seconds."""
        self.waits += 1
        flag = self._flag
        if flag is not None:  # raised from the first look until the turn is this writer's
            flag.raise_()
        try:
            if self.poll > 0 and self._poll(fd, time.monotonic() + self.poll):
                self._held = fd
                return
            waiter = self._waiter
            if waiter is None:
                waiter = self._waiter = _Waiter(lock_path(self.db_path), flag)
            if waiter.take(self.timeout):
                self._held = waiter.fd
                return
        finally:
            if flag is not None:
                flag.lower()
        self.timeouts += 1
        pid = holder_pid(fd)
        holder = f"process {pid}" if pid is not None else "another process"
        raise StoreUnavailableError(
            f"the SQLite store {self.db_path}: the writers' turn did not come within "
            f"store_timeout ({self.timeout:g} s); it is held by {holder} (stopped, or stuck "
            "mid-commit?); nothing was written"
        )

    def _poll(self, fd: int, deadline: float) -> bool:
        """Look for the turn in short steps until `deadline`, the waiters' flag raised; whether it came.

        The holder hands the turn over at its next commit, usually well within
        that: taking it here spares the hand-over between threads of `_Waiter`.
        Without a flag, the holder does not hand over: nothing is looked for.
        The caller raises the flag. A look that ends past `deadline` (a thread
        kept off the CPU) tries once more, so a turn handed over meanwhile is taken.
        """
        if self._flag is None:
            return False
        while True:
            time.sleep(_HAND_OVER_STEP)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                continue
            return True

    def _let_waiter_go_first(self, deadline: float | None) -> bool:
        """The turn was let go to a waiting writer: give it until `deadline` to take it.

        False (and nothing waited for) when there is no deadline (the caller
        may not wait) and the waiter has not taken it yet: the caller does not
        take the turn. Past the deadline the caller goes on (a stopped waiter
        cannot hold it up longer).
        """
        flag = self._flag
        assert flag is not None
        if deadline is None:
            if flag.raised():
                return False
            self._owed = False
            return True
        self._owed = False
        self.hand_overs += 1
        while flag.raised():
            if time.monotonic() >= deadline:
                self.hand_overs_missed += 1
                return True
            time.sleep(_HAND_OVER_STEP)
        self._handed = True
        return True


@final
class WaitFlag:
    """A shared `flock` on `<file>-wait`, held by each writer while it waits for the turn.

    Shared, so any number of waiters raise it at once; `raised` tries the
    exclusive lock without waiting, which fails while any waiter (of any
    process) holds it. A process that dies lets go of its share with its files.
    """

    def __init__(self, path: str) -> None:
        self._raise_fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._look_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def raise_(self) -> None:
        """Tell the holder this process waits for the turn."""
        fcntl.flock(self._raise_fd, fcntl.LOCK_SH)

    def lower(self) -> None:
        """This process waits no more (a no-op when it did not)."""
        fcntl.flock(self._raise_fd, fcntl.LOCK_UN)

    def raised(self) -> bool:
        """Whether a writer of another open file waits for the turn now."""
        try:
            fcntl.flock(self._look_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._look_fd, fcntl.LOCK_UN)
        return False

    def close(self) -> None:
        os.close(self._look_fd)
        os.close(self._raise_fd)


@final
class _Waiter:
    """A thread blocked in `flock` on an open file of its own, for the writer that wants the turn.

    `take(timeout)` asks for the turn and waits at most `timeout`; the thread
    hands the turn over (the lock is then held through `fd`) if the writer
    still wants it when it comes, and lets it go at once otherwise.
    """

    def __init__(self, path: str, flag: WaitFlag | None) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._flag = flag
        self._state = threading.Condition()
        self._wanted = False  # a writer waits for the turn
        self._got = False  # the turn was handed over to that writer
        self._closed = False
        threading.Thread(target=self._run, name="shepherd-sqlite-turn", daemon=True).start()

    def take(self, timeout: float) -> bool:
        """Wait at most `timeout` s for the turn; whether this caller holds it now (through `fd`)."""
        flag = self._flag
        if flag is not None:
            flag.raise_()
        try:
            with self._state:
                self._wanted = True
                self._state.notify_all()
                self._state.wait_for(lambda: self._got or self._closed, timeout)
                got, self._got = self._got, False
                self._wanted = False
                return got
        finally:
            if flag is not None:
                flag.lower()

    def close(self) -> None:
        """End the thread (once its wait, if any, is over); it closes its file itself."""
        with self._state:
            self._closed = True
            self._state.notify_all()

    def _run(self) -> None:
        try:
            while True:
                with self._state:
                    self._state.wait_for(lambda: self._wanted or self._closed)
                    if self._closed:
                        return
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                if self._flag is not None:  # the holder may go on at once
                    self._flag.lower()
                with self._state:
                    if self._wanted and not self._closed:
                        self._wanted = False
                        self._got = True
                        self._state.notify_all()
                        continue
                fcntl.flock(self.fd, fcntl.LOCK_UN)  # nobody waits for it any more
        finally:
            os.close(self.fd)
