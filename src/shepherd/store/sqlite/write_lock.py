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
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from typing import final

from shepherd.errors import StoreUnavailableError

__all__ = ["WriteLock", "holder_pid", "lock_path"]

log = logging.getLogger("shepherd.store.sqlite")


def lock_path(db_path: str) -> str:
    """The lock file of the database at `db_path`."""
    return os.path.realpath(db_path) + "-lock"


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
    """

    def __init__(self, db_path: str, *, timeout: float = 5.0) -> None:
        self.db_path = db_path
        self.timeout = timeout
        self._fd: int | None = None
        # The open file the lock is held through now, if it is held.
        self._held: int | None = None
        self._waiter: _Waiter | None = None
        self.waits = 0
        self.timeouts = 0

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

    def acquire(self, *, wait: bool = True) -> bool:
        """Take the lock (waiting for it at most `timeout`, or not); whether it is held now.

        Raises:
            StoreUnavailableError: Another process held it for all of `timeout`.
        """
        fd = self._fd
        if fd is None:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                return False
            self._wait(fd)
            return True
        self._held = fd
        return True

    def release(self) -> None:
        """Let the lock go (a no-op without a lock file, or when it is not held)."""
        held, self._held = self._held, None
        if held is not None:
            fcntl.flock(held, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the lock file (letting go of the lock, if held) and end the waiting thread."""
        fd, self._fd = self._fd, None
        waiter, self._waiter = self._waiter, None
        self._held = None
        if waiter is not None:
            waiter.close()
        if fd is not None:
            os.close(fd)

    def _wait(self, fd: int) -> None:
        """Wait for another process to let go, at most `timeout` seconds."""
        self.waits += 1
        waiter = self._waiter
        if waiter is None:
            waiter = self._waiter = _Waiter(lock_path(self.db_path))
        if waiter.take(self.timeout):
            self._held = waiter.fd
            return
        self.timeouts += 1
        pid = holder_pid(fd)
        holder = f"process {pid}" if pid is not None else "another process"
        raise StoreUnavailableError(
            f"the SQLite store {self.db_path}: the writers' turn did not come within "
            f"store_timeout ({self.timeout:g} s); it is held by {holder} (stopped, or stuck "
            "mid-commit?); nothing was written"
        )


@final
class _Waiter:
    """A thread blocked in `flock` on an open file of its own, for the writer that wants the turn.

    `take(timeout)` asks for the turn and waits at most `timeout`; the thread
    hands the turn over (the lock is then held through `fd`) if the writer
    still wants it when it comes, and lets it go at once otherwise.
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        self._state = threading.Condition()
        self._wanted = False  # a writer waits for the turn
        self._got = False  # the turn was handed over to that writer
        self._closed = False
        threading.Thread(target=self._run, name="shepherd-sqlite-turn", daemon=True).start()

    def take(self, timeout: float) -> bool:
        """Wait at most `timeout` s for the turn; whether this caller holds it now (through `fd`)."""
        with self._state:
            self._wanted = True
            self._state.notify_all()
            self._state.wait_for(lambda: self._got or self._closed, timeout)
            got, self._got = self._got, False
            self._wanted = False
            return got

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
                with self._state:
                    if self._wanted and not self._closed:
                        self._wanted = False
                        self._got = True
                        self._state.notify_all()
                        continue
                fcntl.flock(self.fd, fcntl.LOCK_UN)  # nobody waits for it any more
        finally:
            os.close(self.fd)
