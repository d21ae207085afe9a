"""LISTEN/NOTIFY: wake-ups from other processes, on other machines.

A committed batch NOTIFYs the channels it touched (encoded by `store.wakeups`,
as the SQLite store's datagrams are); every store LISTENs on a dedicated
connection and rings the matching local `Signals` channels, so a
role in another process wakes at once instead of at its next poll. A NOTIFY
sent while the listener is disconnected is lost: after every reconnect the
listener rings every channel, and the roles' polling remains the safety net.

A store listens only to the channels this process waits on: a client that
submits and awaits results hears the ends of tasks, not every step of every
worker. The waits that matter say so before they look (`listen`: a result,
the events, a call's answer, and every channel for a process that runs roles),
and return once the LISTEN took effect; any other wait adds its channel as it
begins (`want`), and a commit announced before that LISTEN is found by its
next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable
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

_CHANNELS = frozenset((*CHANNELS.values(), TASK_CHANNEL))


def _listen(names: Iterable[str]) -> str:
    return "; ".join(f"LISTEN {name}" for name in sorted(names))


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
        self._wanted: set[str] = set()
        self._listening: frozenset[str] = frozenset()
        self._more: asyncio.Event | None = None
        self._heard: asyncio.Event | None = None

    @property
    def listening(self) -> frozenset[str]:
        """The channels the connection LISTENs to now."""
        return self._listening

    def want(self, name: str) -> None:
        """Listen to announced channel `name` from now on (soon: the listener's task LISTENs).

        Raises:
            ValueError: `name` is not an announced channel.
        """
        if name in self._wanted:
            return
        if name not in _CHANNELS:
            raise ValueError(f"not an announced channel: {name!r}")
        self._wanted.add(name)
        if self._more is not None:
            self._more.set()

    async def listen(self, names: Iterable[str]) -> None:
        """`want` each of `names`; return once the connection LISTENs to them all.

        Returns at once when the listener is not running, and after
        `store_timeout` seconds if it cannot LISTEN meanwhile (disconnected):
        the waits then find what they missed by polling, as after a lost NOTIFY.
        """
        wanted = set(names)
        for name in wanted:
            self.want(name)
        if self._task is None or wanted <= self._listening:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.store_timeout):
                while not wanted <= self._listening:
                    if self._heard is None:
                        self._heard = asyncio.Event()
                    heard = self._heard
                    await heard.wait()

    def _listened(self, names: frozenset[str]) -> None:
        self._listening = names
        heard, self._heard = self._heard, None
        if heard is not None:
            heard.set()

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
        wanted = frozenset(self._wanted)
        try:
            with deadline:
                if wanted:
                    await conn.execute(_listen(wanted))
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
        self._listened(wanted)
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
                await self._hear(conn)
                if added := self._wanted - self._listening:
                    with Deadline(conn, self.store_timeout):
                        await conn.execute(_listen(added))
                    self._listened(self._listening | added)
                    continue
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

    async def _hear(self, conn: Connection) -> None:
        """Deliver what `conn` hears for `check_interval` seconds, or until a channel it
        does not listen to is wanted."""
        if self._more is None:
            self._more = asyncio.Event()
        more = self._more
        more.clear()
        if not self._wanted <= self._listening:
            return
        hearing = asyncio.ensure_future(self._deliver_all(conn))
        asked = asyncio.ensure_future(more.wait())
        try:
            await asyncio.wait((hearing, asked), return_when=asyncio.FIRST_COMPLETED)
        finally:
            # An idle connection's wait for notifications may be cut: nothing is lost.
            asked.cancel()
            hearing.cancel()
            await asyncio.wait((hearing, asked))
        if not hearing.cancelled() and (failed := hearing.exception()) is not None:
            raise failed

    async def _deliver_all(self, conn: Connection) -> None:
        async for note in conn.notifies(timeout=self.check_interval):
            self._deliver(note)

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
