"""LISTEN/NOTIFY: wake-ups from other processes, on other machines.

A committed batch NOTIFYs the channels it touched (encoded by `store.wakeups`,
as the SQLite store's datagrams are); every store LISTENs on a dedicated
connection and rings the matching local `Signals` channels, so a
role in another process wakes at once instead of at its next poll. A NOTIFY
sent while the listener is disconnected is lost: after every reconnect the
listener rings every channel, and the roles' polling remains the safety net.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import psycopg

from shepherd.errors import StoreUnavailableError
from shepherd.store.postgres.connection import connect, describe
from shepherd.store.postgres.deadline import Deadline, timed_out
from shepherd.store.wakeups import CHANNELS, TASK_CHANNEL, local_channels, notifications

if TYPE_CHECKING:
    from shepherd.store.postgres.connection import Connection
    from shepherd.store.signals import Signals

__all__ = ["CHANNELS", "TASK_CHANNEL", "Listener", "local_channels", "notifications"]

log = logging.getLogger("shepherd.store.postgres")

_LISTEN = "; ".join(f"LISTEN {name}" for name in (*CHANNELS.values(), TASK_CHANNEL))


@final
class Listener:
    """A dedicated autocommit connection that LISTENs and rings local channels.

    Args:
        conninfo: The connection string (with keepalives and a connect timeout).
        url: The store URL, for messages.
        signals: The store's local channels.
        own_pid: Returns the backend pid of this store's writer connection:
            its NOTIFYs are skipped, the store rang those channels itself.
        check_interval: Seconds of silence after which the connection is probed.
        store_timeout: Seconds the probe (and the LISTEN after a connect) may
            wait for an answer; past it the connection is dropped and replaced.
        retry_initial: First wait before reconnecting, doubled up to `retry_max`.
        retry_max: Longest wait between reconnection attempts.
    """

    def __init__(
        self,
        conninfo: str,
        url: str,
        signals: Signals,
        *,
        own_pid: Callable[[], int | None] = lambda: None,
        check_interval: float = 10.0,
        retry_initial: float = 0.05,
        retry_max: float = 2.0,
        store_timeout: float = 5.0,
    ) -> None:
        self._where = describe(url)
        self._new_connection = functools.partial(
            connect, conninfo, url, timeout_note=f"store_timeout ({store_timeout:g} s)"
        )
        self._signals = signals
        self._own_pid = own_pid
        self.check_interval = check_interval
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.store_timeout = store_timeout
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None
        #: The listening connection's backend pid (None while disconnected).
        self.backend_pid: int | None = None
        self.notifications = 0
        self.reconnects = 0

    @property
    def connected(self) -> bool:
        """Whether the listening connection is up."""
        return self._conn is not None

    async def start(self) -> None:
        """Connect and LISTEN, then keep listening in the background.

        Raises:
            StoreUnavailableError: The server cannot be reached.
        """
        if self._task is not None:
            return
        self._conn = await self._connect()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="shepherd-postgres-listener"
        )

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        self.backend_pid = None
        if conn is not None:
            await _close(conn)

    def statistics(self) -> dict[str, float]:
        """Notifications received and reconnections made."""
        return {
            "notifications": self.notifications,
            "listener_reconnects": self.reconnects,
        }

    async def _connect(self) -> Connection:
        conn = await self._new_connection()
        deadline = Deadline(conn, self.store_timeout)
        try:
            with deadline:
                await conn.execute(_LISTEN)
        except BaseException as exc:
            await _close(conn)
            if isinstance(exc, psycopg.Error):
                raise StoreUnavailableError(
                    timed_out(f"PostgreSQL store {self._where}", self.store_timeout)
                    if deadline.expired
                    else f"cannot listen on PostgreSQL store {self._where}: {_first_line(exc)}"
                ) from None
            raise
        self.backend_pid = conn.info.backend_pid
        return conn

    async def _run(self) -> None:
        delay = self.retry_initial
        while True:
            conn = self._conn
            if conn is None:
                # A short pause first: a server restarting refuses at once.
                await asyncio.sleep(delay)
                try:
                    conn = self._conn = await self._connect()
                except (StoreUnavailableError, psycopg.Error, OSError) as exc:
                    if delay == self.retry_initial:
                        log.warning("listener cannot reconnect (retrying): %s", exc)
                    else:
                        log.debug("listener cannot reconnect (retrying in %.2gs): %s", delay, exc)
                    delay = min(delay * 2, self.retry_max)
                    continue
                delay = self.retry_initial
                self.reconnects += 1
                log.info("listener reconnected; waking every role to look for missed work")
                self._signals.ring_all()
            try:
                async for note in conn.notifies(timeout=self.check_interval):
                    self._deliver(note)
                # A quiet connection may be a dead one (or a stalled path): probe it.
                with Deadline(conn, self.store_timeout):
                    await conn.execute("SELECT 1")
            except (psycopg.Error, OSError) as exc:
                log.warning("listener connection lost: %s", _first_line(exc))
                self._conn = None
                self.backend_pid = None
                await _close(conn)
            except Exception:  # never end quietly: a dead listener costs every wake-up
                log.exception("listener failed; reconnecting")
                self._conn = None
                self.backend_pid = None
                await _close(conn)

    def _deliver(self, note: psycopg.Notify) -> None:
        self.notifications += 1
        if note.pid == self._own_pid():
            return
        for channel in local_channels(note.channel, note.payload):
            self._signals.ring(channel)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


async def _close(conn: Connection) -> None:
    with contextlib.suppress(psycopg.Error, OSError):
        await conn.close()
