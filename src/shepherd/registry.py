"""The worker registry loop: this process's row in the store, beaten until it stops.

`App.run` runs one `WorkerRegistry` beside the roles. It registers the process
(instance, host, pid, roles, agents), beats the row every `worker_beat`
seconds (on the app's clock), and marks it stopped when cancelled. Store
outages are waited out (`shepherd.outage.Outage`); a row found gone is
registered again. Anything else ends the loop, and so the process, with the
reason.

Its `Standing` tells the roles whether this process may start work: once its
beats have failed for `worker_ttl` (the others then deem it dead and take its
work over), the schedulers, agent workers, call and owner servers of the
process start no claim, request, call or key until a beat reaches the store
again (`shepherd.core.workers.takes_work`). The pause and its end are logged
once each.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, final

from shepherd.clock import Stopwatch
from shepherd.core.workers import takes_work
from shepherd.errors import StoreUnavailableError
from shepherd.outage import Outage

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.workers import Worker
    from shepherd.store.roles import RegistryStore

__all__ = ["STOP_TIMEOUT", "Standing", "WorkerRegistry", "pid_alive"]

log = logging.getLogger("shepherd.registry")

#: Seconds a stopping process waits for its row to be marked stopped.
STOP_TIMEOUT = 2.0


@final
class Standing:
    """Whether this process may start work: its heartbeats reach the store.

    The registry loop reports each beat (`beat_reached`, `beat_failed`); the
    roles ask `takes_work()` before each claim, take of requests or calls, or
    share-out of keys, and while it says no they `wait_takes_work()`. The
    decision is the core's (`takes_work`), on the clock's monotonic time.

    Args:
        ttl: `worker_ttl`.
        clock: Where `monotonic` comes from.
    """

    def __init__(self, *, ttl: float, clock: Clock) -> None:
        self.ttl = ttl
        self.clock = clock
        self._beat_at = clock.monotonic()
        self._failing = False
        self._paused = False
        self._resumed = asyncio.Event()
        #: Times this process stopped taking work.
        self.pauses = 0

    def statistics(self) -> dict[str, int]:
        """Whether the process is paused now, and how many times it was."""
        return {"paused": int(self._paused), "pauses": self.pauses}

    def beat_started(self) -> float:
        """The instant a beat begins (what `beat_reached` is given if it succeeds)."""
        return self.clock.monotonic()

    def beat_reached(self, began: float) -> None:
        """A beat that began at `began` reached the store: take work (again)."""
        self._beat_at = max(self._beat_at, began)
        self._failing = False
        if self._paused:
            self._paused = False
            log.info(
                "worker registry: a heartbeat reached the store again; "
                "this process takes work again"
            )
            self._resumed.set()
            self._resumed = asyncio.Event()

    def beat_failed(self) -> None:
        """A beat failed: if the beats have failed for `worker_ttl`, stop taking work."""
        self._failing = True
        self.takes_work()

    def takes_work(self) -> bool:
        """Whether the process may start work now (logs once when it stops)."""
        now = self.clock.monotonic()
        if takes_work(beat_at=self._beat_at, failing=self._failing, now=now, ttl=self.ttl):
            return True
        if not self._paused:
            self._paused = True
            self.pauses += 1
            log.warning(
                "worker registry: no heartbeat has reached the store for %.0f s "
                "(worker_ttl %g s): the other processes deem this one dead and take its "
                "work over; it starts no claims, requests, calls or keys until a "
                "heartbeat reaches the store again",
                now - self._beat_at,
                self.ttl,
            )
        return False

    async def wait_takes_work(self) -> None:
        """Wait until the process may take work again (at once if it may now)."""
        if not self.takes_work():
            await self._resumed.wait()


@final
class WorkerRegistry:
    """Keeps this process's row in the worker registry while its roles run.

    Args:
        store: The store, as the registry uses it.
        instance: This process's instance (the row's key).
        roles: The roles this process runs.
        agents: The names of the agents it serves (all those registered, or its
            pool's: `App.run(agents=...)`); listed in the row only if the process
            runs the agent role.
        settings: The beat interval and the ttl the supervisor judges rows by.
        clock: What the beats run on.
    """

    def __init__(
        self,
        store: RegistryStore,
        *,
        instance: str,
        roles: Sequence[str],
        agents: Iterable[str],
        settings: Settings,
        clock: Clock,
    ) -> None:
        self.store = store
        self.instance = instance
        self.roles = tuple(roles)
        self.agents = tuple(sorted(agents)) if "agent" in self.roles else ()
        self.settings = settings
        self.clock = clock
        self.interval = settings.worker_beat
        self.outage = Outage("worker registry", log=log, clock=clock, watch=store.watch)
        #: Whether this process may start work, as its beats tell.
        self.standing = Standing(ttl=settings.worker_ttl, clock=clock)
        #: The row as last registered, or None until then (and after it was lost).
        self.worker: Worker | None = None
        self.beats = 0
        self.registrations = 0
        #: Since the last beat reached the store (unmarked before the first).
        self._beat_done = Stopwatch(clock)
        self._touched = False

    def statistics(self) -> dict[str, int]:
        """Registrations and beats so far, whether the row is registered, and the standing."""
        return {
            "registered": int(self.worker is not None),
            "registrations": self.registrations,
            "beats": self.beats,
            **self.standing.statistics(),
        }

    async def run(self) -> None:
        """Register, then beat every `worker_beat` seconds until cancelled; then stop the row."""
        try:
            while True:
                began = self.standing.beat_started()
                try:
                    await self.beat_once()
                except StoreUnavailableError as exc:
                    self.standing.beat_failed()
                    await self.outage.pause(exc)
                    continue
                self.standing.beat_reached(began)
                self.outage.over()
                self._held_back()
                await self.clock.sleep(self.interval)
        finally:
            if self._touched:
                await self._stop()

    def _held_back(self) -> None:
        """Tell the store's watch when this beat came over two beats after the last one.

        The process was held back meanwhile: its writes waited for a lock
        another process held (one frozen inside a SQLite write), the path to the
        store stalled, or the process itself was stopped (SIGSTOP) or its event
        loop blocked. Nobody in it could make progress: the claims that expired
        in that span are not their tasks' failure, whichever process leads the
        supervisors next (this one, once it is back, included).
        """
        gap = self._beat_done.since()
        self._beat_done.mark()
        if gap is not None and gap > 2 * self.interval:
            self.store.watch.slow(gap)

    async def beat_once(self) -> None:
        """Register if not registered yet, else beat; register again if the row is gone.

        Raises:
            StoreUnavailableError: The store cannot be reached now.
        """
        if self.worker is not None:
            if await self.store.beat_worker(self.instance):
                self.beats += 1
                return
            log.warning(
                "worker registry: the row of %s was gone or marked stopped; registering again",
                self.instance,
            )
            self.worker = None
        await self.register()

    async def register(self) -> Worker:
        """Write this process's row afresh (started and beaten now)."""
        self._touched = True
        worker = await self.store.register_worker(
            self.instance,
            host=socket.gethostname(),
            pid=os.getpid(),
            roles=self.roles,
            agents=self.agents,
        )
        self.worker = worker
        self.registrations += 1
        return worker

    async def _stop(self) -> None:
        """Mark the row stopped: best effort, waiting at most STOP_TIMEOUT seconds.

        The write runs in a task of its own, so that neither a cancellation of
        this one nor the timeout interrupts it mid-transaction.
        """
        job = asyncio.ensure_future(self.store.stop_worker(self.instance))
        job.add_done_callback(_consume)
        done, _ = await asyncio.wait({job}, timeout=STOP_TIMEOUT)
        if not done:
            log.warning(
                "worker registry: could not mark %s stopped within %.0f s; it will show as "
                "dead once its heartbeats are %.0f s old",
                self.instance,
                STOP_TIMEOUT,
                self.settings.worker_ttl,
            )
        elif not job.cancelled() and (exc := job.exception()) is not None:
            log.warning("worker registry: could not mark %s stopped: %s", self.instance, exc)
        self.worker = None


def _consume(job: asyncio.Future[None]) -> None:
    """Retrieve a finished stop's error, so that asyncio never reports it unretrieved."""
    if not job.cancelled():
        job.exception()


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie, killed but not reaped, does not).

    Reads `/proc` where there is one; elsewhere asks the kernel with signal 0.
    One PID namespace per host name is assumed (containers have host names of
    their own by default).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[-1].split()
        return bool(fields) and fields[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
