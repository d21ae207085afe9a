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
its disk hung mid-commit) would hold every other writer up silently, as it
would hold SQLite's own lock: a wait longer than `warn_after` (the store's
busy timeout) is logged as a warning naming the holder's pid, and its end
once more. A watching thread sleeps without a timeout while no writer waits.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from typing import final

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

    Args:
        db_path: The database file.
        warn_after: Seconds of waiting for the turn after which a warning is logged.
    """

    def __init__(self, db_path: str, *, warn_after: float = 30.0) -> None:
        self.db_path = db_path
        self.warn_after = warn_after
        self._fd: int | None = None
        # When the wait in progress began (monotonic s), None if none is.
        self._since: float | None = None
        self._warned = False
        self._watching = False
        self._arm = threading.Event()
        self._closed = threading.Event()
        self.waits = 0

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
        self._closed.clear()
        threading.Thread(target=self._watch, name="shepherd-sqlite-turn", daemon=True).start()

    def acquire(self, *, wait: bool = True) -> bool:
        """Take the lock (waiting for it, or not); whether it is held now."""
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

    def release(self) -> None:
        """Let the lock go (a no-op without a lock file)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the lock file (letting go of the lock, if held) and stop watching."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self._closed.set()
            self._arm.set()
            os.close(fd)

    def _wait(self, fd: int) -> None:
        """Wait for another process to let go; watched, so a long wait is told."""
        self.waits += 1
        self._since = time.monotonic()
        if not self._watching:
            self._watching = True
            self._arm.set()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            since, self._since = self._since, None
            if self._warned:
                self._warned = False
                log.warning(
                    "SQLite store %s: the writers' turn came after %.1f s; writes go on",
                    self.db_path,
                    time.monotonic() - since,
                )

    def _watch(self) -> None:
        """Once a wait has begun, look every `warn_after / 2` s until a whole look saw none.

        A wait still going `warn_after` s after it began is told once. The
        thread sleeps without a timeout while writers do not wait.
        """
        while True:
            self._arm.wait()
            if self._closed.is_set():
                return
            self._arm.clear()
            seen = -1
            while True:
                if self._closed.wait(self.warn_after / 2):
                    return
                since = self._since
                if (
                    since is not None
                    and not self._warned
                    and time.monotonic() - since >= self.warn_after
                ):
                    self._warned = True
                    self._tell(since)
                if since is None and self.waits == seen:  # no wait since the last look
                    self._watching = False
                    if self._since is None and self.waits == seen:
                        break  # a wait that begins now arms the watch again
                    self._watching = True
                seen = self.waits

    def _tell(self, since: float) -> None:
        fd = self._fd
        pid = holder_pid(fd) if fd is not None else None
        log.warning(
            "SQLite store %s: writes have waited %.0f s for the writers' turn, held by %s "
            "(stopped, or stuck mid-commit?); they go on once it is let go",
            self.db_path,
            time.monotonic() - since,
            f"process {pid}" if pid is not None else "another process",
        )
