"""The worker registry's record and its one rule: is a process alive, dead or stopped?

Every process that runs roles keeps a `Worker` row in the store and beats it
periodically. A row that has not been beaten for `ttl` seconds (on the store's
clock) belongs to a dead process; a row marked stopped, to one that shut down
gracefully. A process that cannot beat its row for `ttl` seconds is deemed
dead by the others, so it stops taking work until a beat reaches the store
again (`takes_work`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = ["Worker", "WorkerState", "instance_of", "liveness", "takes_work"]


class WorkerState(StrEnum):
    """What the registry says of a process."""

    ALIVE = "alive"
    DEAD = "dead"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True, kw_only=True)
class Worker:
    """One process that runs roles, as the worker registry knows it.

    Attributes:
        instance: The process's instance id (`App.instance`, `host:pid:suffix`);
            its roles own claims as `<instance>/s`, `<instance>/a`, `<instance>/v`.
        host: The host name it runs on.
        pid: Its process id on that host.
        roles: The roles it runs (`scheduler`, `agent`, `supervisor`).
        agents: The agents it serves (empty unless it runs the agent role).
        started_at: When it registered (store clock).
        beat_at: Its last heartbeat (store clock).
        stopped_at: When it stopped gracefully, or None.
        died_at: When a process on its host found it gone (its pid no longer
            runs), or None: it is dead from then on, whatever its last beat.
    """

    instance: str
    host: str
    pid: int
    roles: tuple[str, ...]
    agents: tuple[str, ...]
    started_at: datetime
    beat_at: datetime
    stopped_at: datetime | None = None
    died_at: datetime | None = None

    def state(self, *, now: datetime, ttl: float) -> WorkerState:
        """`liveness` of this worker at `now` (the store's clock)."""
        if self.died_at is not None and self.stopped_at is None:
            return WorkerState.DEAD
        return liveness(beat_at=self.beat_at, stopped_at=self.stopped_at, now=now, ttl=ttl)

    @property
    def pid_label(self) -> str:
        """`host:pid`, how an operator names this process."""
        return f"{self.host}:{self.pid}"


def liveness(
    *, beat_at: datetime, stopped_at: datetime | None, now: datetime, ttl: float
) -> WorkerState:
    """Whether a process is alive, dead or stopped at `now`.

    Args:
        beat_at: Its last heartbeat.
        stopped_at: When it stopped gracefully, or None.
        now: The store's clock.
        ttl: Seconds without a heartbeat after which a process is deemed dead.

    Returns:
        `STOPPED` once marked stopped; else `DEAD` from `beat_at + ttl` on; else
        `ALIVE`.
    """
    if stopped_at is not None:
        return WorkerState.STOPPED
    if beat_at + timedelta(seconds=ttl) <= now:
        return WorkerState.DEAD
    return WorkerState.ALIVE


def instance_of(owner: str) -> str:
    """The instance id in a role's owner name: `host:pid:abcd/s` -> `host:pid:abcd`.

    A name without a role suffix is returned unchanged.
    """
    instance, slash, _ = owner.rpartition("/")
    return instance if slash else owner


def takes_work(*, beat_at: float, failing: bool, now: float, ttl: float) -> bool:
    """Whether this process may start new work (claims, requests, calls, keys).

    The other processes deem a process dead once its row has gone `ttl`
    seconds without a heartbeat, and take its work over; a process whose
    heartbeats cannot reach the store must not start work they will take from
    it. So it stops once its last beat failed and the last one that reached
    the store began `ttl` seconds ago or more, and starts again with the next
    beat that reaches the store. A beat that has not failed (yet) never stops
    it: a clock moved far ahead between two beats is not an outage.

    Args:
        beat_at: When the last beat that reached the store began (the local
            monotonic clock; the row's heartbeat is no older than this), or
            when the process began beating if none has yet.
        failing: Whether the last beat failed (the store unavailable or slower
            than `store_timeout`).
        now: The local monotonic clock.
        ttl: `worker_ttl`.
    """
    return not failing or now - beat_at < ttl
