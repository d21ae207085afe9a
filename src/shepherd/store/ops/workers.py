"""The worker registry: one row per process instance, beaten on the store's clock.

`dead_workers` names every given instance that is stopped, has no row, or
whose last beat is `ttl` seconds old or older (`shepherd.core.workers.liveness`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from shepherd.core.workers import Worker
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "WORKER_RETENTION",
    "BeatWorker",
    "DeadWorkers",
    "ListWorkers",
    "MarkDied",
    "ReapWorker",
    "RegisterWorker",
    "StopWorker",
    "UnreapedWorkers",
    "Workers",
]

#: Seconds a worker row stays after its process stopped or went silent.
WORKER_RETENTION = 86400.0


@operation
class RegisterWorker(Write[Worker]):
    """Insert or replace the row of process `instance`: started and beaten now.

    A replaced row is not stopped any more. In the same transaction, rows
    stopped, or not beaten, for more than WORKER_RETENTION are deleted.
    Returns the row as written.
    """

    instance: str
    _: KW_ONLY
    host: str
    pid: int
    roles: Sequence[str]
    agents: Sequence[str]


@operation
class BeatWorker(Write[bool]):
    """A heartbeat: the row's `beat_at` becomes now.

    False, changing nothing, if the row is gone or marked stopped: the caller
    registers again.
    """

    instance: str


@operation
class StopWorker(Write[None]):
    """Mark the row stopped now (a graceful stop); a stopped row stays stopped."""

    instance: str


@operation
class ListWorkers(Read[list[Worker]]):
    """Workers last heard from (beat or stop) at or after `since` (all when None).

    Live workers beat every few seconds, so a `since` older than the ttl lists
    all of them, plus those that stopped or fell silent after it. Newest
    started first.
    """

    _: KW_ONLY
    since: datetime | None = None


@operation
class DeadWorkers(Read[set[str]]):
    """The instances among `instances` whose processes are not alive.

    That is, those stopped, without a row, or whose last beat is `ttl`
    seconds old or older on the store's clock.
    """

    instances: Sequence[str]
    _: KW_ONLY
    ttl: float


@operation
class UnreapedWorkers(Read[list[Worker]]):
    """Processes neither stopped nor attributed yet: the live, and the newly dead."""


@operation
class MarkDied(Write[bool]):
    """A process found gone on its host: dead from now (False if stopped or marked)."""

    instance: str


@operation
class ReapWorker(Write[None]):
    """Record that a dead process's crash has been attributed (it is not looked at again)."""

    instance: str


class Workers(Runs):
    """The store's methods for the worker registry."""

    register_worker = method(RegisterWorker)
    beat_worker = method(BeatWorker)
    stop_worker = method(StopWorker)
    list_workers = method(ListWorkers)
    unreaped_workers = method(UnreapedWorkers)
    mark_died = method(MarkDied)
    reap_worker = method(ReapWorker)

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        """`DeadWorkers`; none asked reads nothing."""
        if not instances:
            return set()
        return await self.read(DeadWorkers(tuple(instances), ttl=ttl))
