"""Retention: deleting ended tasks, their tombstones, and expired calls, a batch at a time.

`purge_tasks` deletes at most `limit` tasks that ended (`processed`,
`compensated`, `cancelled`) with `updated_at` before `ended_before`, together
with their steps, events, requests, replies and done keys (`task_id/...`); a
task in any other state (`error` included) is never touched, whatever its age.
Each purged task with a key leaves a tombstone in the same transaction; while
it exists, `submit_task` of that (workflow, key) creates nothing and returns
the purged task's id. `purge_tombstones` deletes at most `limit` tombstones
purged before `purged_before`; after that the key makes a new task.
"""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from shepherd.core.retention import Tombstone
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["GetTombstone", "PurgeCalls", "PurgeTasks", "PurgeTombstones", "Retention"]


@operation
class PurgeTasks(Write[int]):
    """Delete up to `limit` ended tasks last changed before `ended_before`; how many.

    Only `processed`, `compensated` and `cancelled` tasks go, each with its
    steps, events, requests, replies, signals, done keys and child links; a keyed one leaves a
    tombstone. One short transaction; oldest first.
    """

    _: KW_ONLY
    ended_before: datetime
    limit: int


@operation
class PurgeTombstones(Write[int]):
    """Delete up to `limit` tombstones written before `purged_before`; how many.

    The idempotency keys of bulk requests (`Idempotency-Key`) kept as long go
    with them, up to `limit` too (not counted): a key replays its reply for
    as long as a purged task's key keeps returning it, and no longer.
    """

    _: KW_ONLY
    purged_before: datetime
    limit: int


@operation
class PurgeCalls(Write[int]):
    """Delete up to `limit` calls (`app.call`) whose expiry has passed, answered or not.

    A call expires a minute after its caller stopped waiting: its row, and an
    answer nobody will read, go. Returns how many.
    """

    _: KW_ONLY
    limit: int


@operation
class GetTombstone(Read[Tombstone | None]):
    """The tombstone of a purged task, or None (never purged, or purged without a key)."""

    task_id: str


class Retention(Runs):
    """The store's methods for retention (`shepherd.supervisor.retention.purge`)."""

    purge_tasks = method(PurgeTasks)
    purge_tombstones = method(PurgeTombstones)
    purge_calls = method(PurgeCalls)
    get_tombstone = method(GetTombstone)
