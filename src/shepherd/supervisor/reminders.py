"""Reminders of exclusive owners, fired by the leading supervisor: one call per tick.

Each scan of the leader fires the due reminders (`store.fire_reminders`):
each becomes a call of its key, queued for the key's owner in the
transaction that moves the reminder to its next tick, under the tick's own
call id. A leader that dies after that commit has fired the tick; one that
dies before has not, and its successor fires it; two processes that both
believe they lead queue it once (the call id is unique). The leader wakes for
the next tick if it comes before its next scan (`until_next`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.store.roles import SupervisorStore

__all__ = ["FIRE_LIMIT", "fire_reminders", "until_next"]

log = logging.getLogger("shepherd.supervisor")

#: Most reminders one scan fires (the rest are due still, and fire at the next).
FIRE_LIMIT = 1000


async def fire_reminders(store: SupervisorStore) -> tuple[int, datetime | None]:
    """Fire the due reminders: how many calls were queued, and the next tick of any reminder.

    Only a scan at which one is due writes.

    Raises:
        StoreUnavailableError: The store cannot be reached (the scan's caller retries).
    """
    following = await store.next_reminder()  # a read: an idle scan writes nothing here
    if following is None or following > store.now():
        return 0, following
    queued, following = await store.fire_reminders(limit=FIRE_LIMIT)
    if queued:
        log.debug("fired %d reminder(s)", queued)
    return queued, following


def until_next(following: datetime | None, *, now: datetime, interval: float) -> float:
    """Seconds the leader waits before its next scan: `interval`, or less if a tick comes sooner."""
    if following is None:
        return interval
    return min(interval, max((following - now).total_seconds(), 0.0))
