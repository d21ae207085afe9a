"""When a batching exclusive agent's key has a batch due: its backlog, read once per wake-up.

A key's owner loop (`OwnerServer._serve`) of a batching agent waits until its
key's waiting calls make a batch (`core.batching.batch_due`). The backlogs of
all the agent's keys are read at once and shared by its key loops until the
next wake-up of CALLS: one read per wake-up, not one per key.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, final

from shepherd.core.batching import batch_due

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.governance.batch import Batch
    from shepherd.store.roles import OwnerStore

__all__ = ["Backlogs"]


@final
class Backlogs:
    """The backlogs of each batching agent's keys, shared by its key loops.

    Args:
        store: Where the backlogs are read (`key_backlogs`) and the time told.
    """

    def __init__(self, store: OwnerStore) -> None:
        self.store = store
        #: Per agent: the backlogs read since the last wake-up of CALLS (the wake-up's
        #: event, and the read), shared by that agent's key loops.
        self._read: dict[
            str, tuple[asyncio.Event, asyncio.Future[dict[str, tuple[int, datetime]]]]
        ] = {}

    async def due(
        self, agent: str, key: str, batch: Batch, wake: asyncio.Event, *, fresh: bool
    ) -> float | None:
        """Seconds until the key's waiting calls make a batch (0: now), or None if none wait.

        The backlogs read since the wake-up `wake` are used unless this loop has
        just flushed (`fresh`).
        """
        shared = self._read.get(agent)
        if fresh or shared is None or shared[0] is not wake:
            read = asyncio.ensure_future(self.store.key_backlogs(agent))
            read.add_done_callback(functools.partial(self._read_done, agent))
            shared = self._read[agent] = (wake, read)
        backlog = (await asyncio.shield(shared[1])).get(key)
        return None if backlog is None else self.due_of(batch, *backlog)

    def due_of(self, batch: Batch, waiting: int, oldest: datetime | None) -> float | None:
        """Seconds until `waiting` calls, the oldest sent at `oldest`, make a batch.

        None if none wait.
        """
        if not waiting or oldest is None:
            return None
        age = (self.store.now() - oldest).total_seconds()
        return batch_due(
            max_items=batch.max_items, max_delay=batch.max_delay, waiting=waiting, oldest_age=age
        )

    def _read_done(self, agent: str, read: asyncio.Future[object]) -> None:
        """Forget a backlog read that failed, so that the next look reads again."""
        if read.cancelled() or read.exception() is not None:
            shared = self._read.get(agent)
            if shared is not None and shared[1] is read:
                del self._read[agent]
