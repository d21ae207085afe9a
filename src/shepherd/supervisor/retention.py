"""Retention passes: delete ended tasks and expired key tombstones, one short batch at a time.

The supervisor's leader runs a bounded pass every `purge_interval`;
`shepherd purge` runs an unbounded one. Each batch is one store transaction
of at most `purge_batch` rows, so a pass never holds the store for long.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.core.retention import more
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from shepherd.store.roles import RetentionStore

__all__ = ["Purged", "purge"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Purged:
    """What one pass deleted.

    Attributes:
        tasks: Ended tasks deleted (with their steps, events and messages).
        tombstones: Key tombstones deleted (their keys may make new tasks again).
        complete: Whether the pass found nothing more to delete (else its
            batch budget ran out first).
    """

    tasks: int
    tombstones: int
    complete: bool
    #: Expired calls (`app.call`) deleted.
    calls: int = 0


async def purge(
    store: RetentionStore,
    *,
    ended_before: datetime | None,
    purged_before: datetime | None,
    batch: int,
    max_batches: int | None = None,
) -> Purged:
    """Delete ended tasks and tombstones older than the cut-offs, and expired calls,
    `batch` rows per transaction.

    Args:
        store: The state store.
        ended_before: Tasks that ended before this go (None: none).
        purged_before: Tombstones written before this go (None: none).
        batch: Most rows per transaction.
        max_batches: Most transactions for each kind of row (None: until done).

    Raises:
        ConfigError: `batch` or `max_batches` is not positive.
        StoreUnavailableError: The store could not be reached; the batches
            committed before stay done.
    """
    if batch < 1:
        raise ConfigError("purge_batch", f"must be a positive integer, not {batch}")
    if max_batches is not None and max_batches < 1:
        raise ConfigError("max_batches", f"must be a positive integer, not {max_batches}")
    tasks, tasks_done = 0, True
    if ended_before is not None:
        cut = ended_before
        tasks, tasks_done = await _batches(
            lambda: store.purge_tasks(ended_before=cut, limit=batch), batch, max_batches
        )
    tombstones, tombstones_done = 0, True
    if purged_before is not None:
        cut_keys = purged_before
        tombstones, tombstones_done = await _batches(
            lambda: store.purge_tombstones(purged_before=cut_keys, limit=batch),
            batch,
            max_batches,
        )
    calls, calls_done = await _batches(lambda: store.purge_calls(limit=batch), batch, max_batches)
    return Purged(
        tasks=tasks,
        tombstones=tombstones,
        calls=calls,
        complete=tasks_done and tombstones_done and calls_done,
    )


async def _batches(
    one: Callable[[], Awaitable[int]], batch: int, max_batches: int | None
) -> tuple[int, bool]:
    """Run `one` batch after another while each is full; (rows deleted, whether all were)."""
    total, runs = 0, 0
    while True:
        purged = await one()
        total += purged
        runs += 1
        if not more(purged, limit=batch, batches=runs, max_batches=max_batches):
            return total, purged < batch
