"""Resolved alerts told to the alert sinks: the store's outbox, worked off by the supervisor's leader.

The write that ends a task well resolves its alerts in its own transaction,
in whichever process ran it; the sinks are told later, by the supervisor
that leads, so that a resolution is not lost when that process dies. Each
scan reads the resolutions not told yet, sends them in the background (a
slow webhook never holds the scan back) and marks them told once every sink
was tried: at least once, since a leader that dies between the two leaves
them to be sent again by the next. A sink that fails is logged and not
retried, as for a firing alert.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, final

from shepherd.errors import StoreUnavailableError

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.store.ops.alerts import Alerts

__all__ = ["Announce", "Resolutions"]

log = logging.getLogger("shepherd.supervisor")

#: How a resolution reaches every sink (`App.announce_resolution`): it never raises.
Announce = Callable[["StoredAlert"], Awaitable[None]]


@final
class Resolutions:
    """Tells the sinks of resolved alerts, at most `batch` in flight at a time.

    Args:
        store: The store's alerts.
        announce: Sends one resolution to every sink.
        batch: Most resolutions read, and in flight, at once.
    """

    def __init__(self, store: Alerts, announce: Announce, *, batch: int = 100) -> None:
        self.store = store
        self.announce = announce
        self.batch = batch
        #: Resolutions told to the sinks and marked by this process.
        self.sent = 0
        self._in_flight: set[int] = set()
        self._jobs: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        """Resolutions being told now, not marked yet."""
        return len(self._in_flight)

    async def once(self) -> int:
        """Read the resolutions not told yet and start telling them; how many were started.

        Raises:
            StoreUnavailableError: The store could not be read (the scan's outage).
        """
        if len(self._in_flight) >= self.batch:  # the sinks are slow: let them catch up
            return 0
        found = [
            a
            for a in await self.store.unsent_resolutions(limit=self.batch)
            if a.id not in self._in_flight
        ]
        if not found:
            return 0
        self._in_flight.update(a.id for a in found)
        job = asyncio.create_task(self._tell(found), name="shepherd-alert-resolutions")
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        return len(found)

    async def _tell(self, alerts: list[StoredAlert]) -> None:
        """Tell every sink of each resolution, then mark them told."""
        ids = [a.id for a in alerts]
        try:
            await asyncio.gather(*(self.announce(a) for a in alerts))
            await self.store.mark_resolutions_sent(ids)
            self.sent += len(ids)
        except StoreUnavailableError as exc:  # told again by the next scan: at least once
            log.warning("could not mark %d alert resolutions as sent: %s", len(ids), exc)
        except Exception:
            log.exception("telling the alert sinks of %d resolutions failed", len(ids))
        finally:
            self._in_flight.difference_update(ids)

    async def close(self) -> None:
        """Stop telling: what was not marked yet is told again by the next leader."""
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
