"""Crash attribution, the supervisor's part: processes that died or froze, and what they held.

`CrashAttribution` is the half of the `Supervisor` that finds dead and frozen
processes in the worker registry and resets (or quarantines) the tasks they
owned or ran, by the core's `on_crash`; the scan of expired claims is the
other half (`supervisor.py`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from dataclasses import replace
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.supervision import (
    FROZEN_BEATS,
    Escalate,
    Reset,
    is_silent,
    on_crash,
    suspected,
)
from shepherd.core.workers import WorkerState
from shepherd.registry import pid_alive
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.alerts import RaiseAlert
    from shepherd.config import Settings
    from shepherd.core.records import Lease
    from shepherd.core.supervision import CrashPolicy
    from shepherd.core.workers import Worker
    from shepherd.metrics import Metrics
    from shepherd.store.roles import SupervisorStore

__all__ = ["CrashAttribution", "event_kind"]

log = logging.getLogger("shepherd.supervisor")


class CrashAttribution:
    """Finds processes that died or froze and attributes it to the tasks they held.

    The `Supervisor` is one: it sets every attribute below in its `__init__`.
    """

    store: SupervisorStore
    instance: str
    settings: Settings
    metrics: Metrics
    raise_alert: RaiseAlert
    crash_policy: CrashPolicy
    resets: int
    escalations: int
    crashes: int
    _frozen: dict[str, datetime]
    _recovered_at: datetime | None

    def _after_outage(self, now: datetime) -> bool:
        raise NotImplementedError  # the Supervisor's

    async def attribute_crashes(
        self,
        lease: Lease,
        *,
        stalled: set[str] | None = None,
        workers: list[Worker] | None = None,
    ) -> int:
        """Find processes that died or froze and attribute it to the tasks they held.

        A process is dead when the worker registry says so (no beat within
        `worker_ttl`), or at once when it ran on this host and its pid is gone.
        A process that is silent for FROZEN_BEATS beats while claims it holds
        (owns, or runs a step of) expire (`stalled`: the holders of expired
        claims) froze, unless the store itself was just unreachable (which
        silences every process); a freeze seen is attributed even if the process
        beats again before its verdicts could be written. Each task it owned or
        ran is reset without a failure counted; a step running there records
        the crash (see `on_crash`). Returns how many tasks were handled.

        Args:
            lease: The leadership lease the verdicts are fenced by.
            stalled: The processes holding expired claims.
            workers: The registry's unreaped processes, if already read.
        """
        now = self.store.now()
        settings = self.settings
        here = socket.gethostname()
        stalled = stalled or set()
        handled = 0
        if workers is None:
            workers = await self.store.unreaped_workers()
        for worker in workers:
            if worker.instance == self.instance:
                continue
            if worker.state(now=now, ttl=settings.worker_ttl) is WorkerState.DEAD:
                handled += await self._reap(worker, lease, now, frozen=False)
            elif worker.host == here and not pid_alive(worker.pid):
                await self.store.mark_died(worker.instance)
                handled += await self._reap(worker, lease, now, frozen=False)
            elif worker.instance in stalled and not self._after_outage(now):
                froze_after = self._frozen.get(worker.instance)
                if froze_after is None and is_silent(
                    worker.beat_at, now=now, beat=settings.worker_beat, beats=FROZEN_BEATS
                ):
                    froze_after = self._frozen[worker.instance] = worker.beat_at
                if froze_after is not None:
                    handled += await self._reap(
                        replace(worker, beat_at=froze_after), lease, now, frozen=True
                    )
            elif worker.instance not in stalled:  # nothing of it expired: nothing to attribute
                self._frozen.pop(worker.instance, None)
        return handled

    async def _reap(self, worker: Worker, lease: Lease, now: datetime, *, frozen: bool) -> int:
        victims = await self.store.crash_victims(worker.instance, beat_at=worker.beat_at)
        # A freeze is an episode of a living process: each one counts on its own.
        episode = f"{worker.instance}@{round(worker.beat_at.timestamp() * 1000)}"
        verdicts = [
            (
                task,
                running,
                on_crash(
                    task,
                    instance=episode if frozen else worker.instance,
                    owned=owned,
                    running=running,
                    policy=self.crash_policy,
                    now=now,
                    how="froze" if frozen else "crashed",
                ),
            )
            for task, owned, running in victims
        ]
        applied = await asyncio.gather(
            *(
                self.store.apply_crash(task, verdict, leader=lease)
                for task, _, verdict in verdicts
                if verdict is not None
            )
        )
        reset = quarantined = ran = suspects = 0
        done = [(t, r, v) for t, r, v in verdicts if v is not None]
        for (task, running, verdict), ok in zip(done, applied, strict=True):
            if not ok:
                continue
            task_event(
                task.id, task.workflow, event_kind(verdict), verdict.reason, epoch=task.lock_epoch
            )
            if isinstance(verdict, Escalate):
                quarantined += 1
                self.escalations += 1
                self.metrics.supervisor_escalations.labels(task.workflow, "crash").inc()
                self.raise_alert(task, reason=verdict.reason)
            else:
                reset += 1
                self.resets += 1
                self.metrics.supervisor_resets.labels(task.workflow, "crash").inc()
                if running is not None:
                    ran += 1
                    suspects += suspected(verdict.crashes or (), running)
        self._recovered_at = now
        left = len(done) - sum(applied)
        if left:
            # A verdict not applied: its task moved on, or its row was held by
            # another session (the frozen process's own open transaction, say) and
            # skipped. The next scan attributes what is still the process's.
            log.info(
                "worker %s: %d of its tasks were not handled; the next scan looks again",
                worker.instance,
                left,
            )
        else:
            await self.store.reap_worker(worker.instance)
            self._frozen.pop(worker.instance, None)
        self.crashes += 1
        log.warning(
            "worker %s (pid %d on %s) %s: %d tasks recovered without a failure counted "
            "(%d had a step running there; %d of those steps were running at an earlier "
            "crash too and now run apart), %d quarantined as suspected poison",
            worker.instance,
            worker.pid,
            worker.host,
            "froze (no beat for two beats)" if frozen else "died",
            reset,
            ran,
            suspects,
            quarantined,
        )
        return reset + quarantined


def event_kind(decision: object) -> EventKind:
    """What a supervisor decision did to its task, for the task log."""
    if isinstance(decision, Reset):
        return EventKind.RESET
    return EventKind.ERROR if isinstance(decision, Escalate) else EventKind.COMPENSATING
