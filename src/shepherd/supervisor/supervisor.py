"""The Supervisor role: periodically find expired claims and apply the core's decision.

Only the holder of the `supervisor` lease acts; its writes are fenced by the
lease epoch and the task's `lock_epoch`. It knows no business logic: it only
changes state (reset, escalate, compensate), raises alerts and tells the
alert sinks of the alerts resolved since (`resolutions`). Its scan interval,
lease renewals and retention passes run on the app's clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.clock import Stopwatch
from shepherd.core.events import EventKind
from shepherd.core.retention import cutoff, due
from shepherd.core.supervision import (
    CrashPolicy,
    Escalate,
    Expiry,
    Reset,
    SupervisionPolicy,
    is_silent,
    on_claim_expired,
)
from shepherd.core.workers import WorkerState, instance_of
from shepherd.errors import StoreUnavailableError
from shepherd.metrics import Metrics
from shepherd.outage import Outage
from shepherd.store.contract import REPLY_GRACE
from shepherd.supervisor.crashes import CrashAttribution, event_kind
from shepherd.supervisor.deadlines import cancel_overdue
from shepherd.supervisor.reminders import fire_reminders, until_next
from shepherd.supervisor.resolutions import Resolutions
from shepherd.supervisor.retention import purge
from shepherd.supervisor.schedules import fire_schedules, grace_of
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from collections.abc import Mapping

    from shepherd.alerts import RaiseAlert
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.records import Lease, Task
    from shepherd.scheduler import Workflow
    from shepherd.store.contract import HeldRequest
    from shepherd.store.roles import SupervisorStore
    from shepherd.supervisor.resolutions import Announce

log = logging.getLogger("shepherd.supervisor")

LEASE = "supervisor"
#: Most purge transactions in one retention pass (of `purge_batch` tasks each).
PURGE_BATCHES = 20


@final
class Supervisor(CrashAttribution):
    """Scans for tasks whose `complete_by` has passed, while it holds the lease.

    Args:
        store: The store, as the supervisor uses it.
        holder: This supervisor's name in the leadership lease.
        instance: This process's instance in the worker registry (never deemed dead
            by itself).
        settings: Intervals, the lease's ttl, crash and retention settings.
        clock: What the scan interval, lease renewals and retention passes run on.
        workflows: The registered workflows, by name: their supervision policies.
        raise_alert: How an escalated task reaches an operator.
        rng: The source of the backoff's jitter.
        metrics: Where resets, escalations and compensations are counted (the
            App's; a registry of its own when None).
        announce: How a resolved alert reaches the sinks; None tells them nothing.
    """

    def __init__(
        self,
        store: SupervisorStore,
        *,
        holder: str,
        instance: str,
        settings: Settings,
        clock: Clock,
        workflows: Mapping[str, Workflow],
        raise_alert: RaiseAlert,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
        announce: Announce | None = None,
    ) -> None:
        self.store = store
        self.resolutions = None if announce is None else Resolutions(store, announce)
        self.metrics = Metrics() if metrics is None else metrics
        self.holder = holder
        self.instance = instance
        self.settings = settings
        self.clock = clock
        self.workflows = workflows
        self.raise_alert = raise_alert
        self.rng = rng or random.Random()
        self.interval = settings.supervisor_interval
        # Leadership is renewed every ttl/3, apart from scans: a dead leader is
        # replaced within ttl + ttl/3 (two intervals with the defaults).
        self.ttl = settings.lease_ttl
        self.lease: Lease | None = None
        #: When the lease was last taken or renewed (monotonic), or None.
        self._renewed_at: float | None = None
        self.scans = 0
        self.resets = 0
        self.escalations = 0
        self.compensations = 0
        #: Tasks cancelled because their deadline passed (`supervisor.deadlines`).
        self.deadlines = 0
        #: Tasks created by schedules' ticks (`supervisor.schedules`).
        self.fired = 0
        #: Calls queued by reminders' ticks, and the next tick (`supervisor.reminders`).
        self.reminded = 0
        self._next_reminder: datetime | None = None
        self._became_leader = asyncio.Event()
        self.scan_outage = Outage("supervisor scans", log=log, clock=clock, watch=store.watch)
        self.lease_outage = Outage("supervisor lease", log=log, clock=clock, watch=store.watch)
        #: Expired claims reset without a failure counted: they expired while this
        #: process could not reach the store, or while their step waited in probation.
        self.forgiven = 0
        #: Processes seen frozen (silent for FROZEN_BEATS while claims they held
        #: expired) whose freeze is not attributed yet, with the beat they froze after.
        self._frozen: dict[str, datetime] = {}
        #: When this supervisor last attributed a crash or a freeze (the store's clock).
        self._recovered_at: datetime | None = None
        #: Ended tasks deleted by retention, and when the last pass ran (monotonic).
        self.purged = 0
        self._purged_at: float | None = None
        #: Dead processes whose crash was attributed.
        self.crashes = 0
        self.crash_policy = CrashPolicy(
            poison_crashes=settings.poison_crashes,
            max_owner_deaths=settings.max_owner_deaths,
        )

    def statistics(self) -> dict[str, int]:
        return {
            "leader": int(self.lease is not None),
            "scans": self.scans,
            "resets": self.resets,
            "escalations": self.escalations,
            "compensations": self.compensations,
            "deadlines": self.deadlines,
            "fired": self.fired,
            "reminded": self.reminded,
            "forgiven": self.forgiven,
            "crashes": self.crashes,
        }

    def policy_for(self, workflow: str) -> SupervisionPolicy:
        spec = self.workflows.get(workflow)
        return spec.policy if spec is not None else SupervisionPolicy()

    async def run(self) -> None:
        """Hold (or wait for) the lease, and scan every `interval` while leading."""
        holder = asyncio.create_task(self._hold_lease(), name="shepherd-supervisor-lease")
        waited = Stopwatch(self.clock)
        try:
            while True:
                # Stopped or starved past its interval (SIGSTOP, a blocked loop):
                # this process made no progress meanwhile, nor did the claims it
                # holds. Said before this scan, which may decide about them.
                gap = waited.since()
                if gap is not None and gap > self.interval + 2 * self.settings.worker_beat:
                    self.store.watch.slow(gap)
                try:
                    await self.scan_once()
                    await self.purge_once()
                    if self.lease is not None and self.resolutions is not None:
                        await self.resolutions.once()
                except StoreUnavailableError as exc:  # retried; anything else stops us
                    self.scan_outage.failed(exc)
                else:  # a scan mostly reads: the process's next write ends the outage
                    self.scan_outage.over(wrote=False)
                self._became_leader.clear()
                waited.mark()
                wait = self.interval
                if self.lease is not None and self._next_reminder is not None:
                    wait = until_next(self._next_reminder, now=self.store.now(), interval=wait)
                await self.clock.wait_event(self._became_leader, wait)
        finally:
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)
            if self.resolutions is not None:
                await self.resolutions.close()
            if self.lease is not None:
                try:
                    await asyncio.shield(self.store.release_lease(LEASE, holder=self.holder))
                except Exception:
                    log.exception("could not release the supervisor lease")

    @property
    def _margin(self) -> float:
        """Seconds after an outage in which claims still expire because of it.

        Owners need a moment to reconnect and make progress again: their
        backoff (at most 2 s), the reply grace, and one scan.
        """
        return 2.0 + REPLY_GRACE + self.interval

    def _after_outage(self, now: datetime) -> bool:
        """Whether this process is in (or just out of) a store outage at `now`."""
        return self.store.watch.recently(now, margin=self._margin)

    def forgives(self, task: Task) -> bool:
        """Whether `task`'s claim expired while this process could not reach the store.

        The outage starts at the first failure of any of the process's loops,
        and ends when one of them next writes: a claim that expired in it (or
        just after) is not the task's failure, from the first scan on.
        """
        return task.complete_by is not None and self.store.watch.covers(
            task.complete_by, margin=self._margin
        )

    async def purge_once(self) -> int:
        """A retention pass, while leading and at most every `purge_interval`.

        Deletes, `purge_batch` at a time and at most PURGE_BATCHES batches, the
        tasks that ended more than `retention` seconds ago and the key
        tombstones older than `key_retention`, then lets the store checkpoint.
        A pass that left some behind is followed by another at the next scan,
        so a backlog is worked off in bounded steps. Returns how many tasks
        were deleted.
        """
        settings = self.settings
        interval = max(settings.purge_interval, self.interval)
        if self.lease is None or not due(
            self._purged_at, now=self.clock.monotonic(), interval=interval
        ):
            return 0
        now = self.store.now()
        done = await purge(
            self.store,
            ended_before=cutoff(now, settings.retention),
            purged_before=cutoff(now, settings.key_retention),
            batch=settings.purge_batch,
            max_batches=PURGE_BATCHES,
        )
        await self.store.checkpoint()
        self._purged_at = self.clock.monotonic() if done.complete else None
        self.purged += done.tasks
        if done.tasks or done.tombstones or done.calls:
            log.info(
                "retention: purged %d tasks that ended over %g s ago, %d key tombstones "
                "and %d expired calls%s",
                done.tasks,
                settings.retention,
                done.tombstones,
                done.calls,
                "" if done.complete else "; more are left for the next scan",
            )
        return done.tasks

    async def _hold_lease(self) -> None:
        """Renew the lease every `ttl/3`, counted from its last renewal (a scan's too)."""
        while True:
            if self._fresh_lease() is None:  # else a scan renewed it meanwhile
                try:
                    await self.renew()
                except StoreUnavailableError as exc:  # our writes are fenced anyway
                    self.lease_outage.failed(exc)
                else:
                    self.lease_outage.over()
            await self.clock.sleep(self._until_stale())

    def _until_stale(self) -> float:
        """Seconds until the lease held is `ttl/3` old; `ttl/3` if none is, or it already is."""
        period = self.ttl / 3
        at = self._renewed_at
        if self.lease is None or at is None:
            return period
        left = period - (self.clock.monotonic() - at)
        return left if left > 0 else period

    def _fresh_lease(self) -> Lease | None:
        """The lease held, if renewed less than `ttl/3` ago: a scan need not renew it again.

        Its writes are fenced by the lease's epoch in the store anyway; this only
        spares an idle leader one write a scan.
        """
        at = self._renewed_at
        if self.lease is None or at is None or self.clock.monotonic() - at >= self.ttl / 3:
            return None
        return self.lease

    async def renew(self) -> Lease | None:
        """Take or renew the leadership lease; None while another supervisor holds it."""
        lease = await self.store.acquire_lease(LEASE, holder=self.holder, ttl=self.ttl)
        if lease is None:
            if self.lease is not None:
                log.info("supervisor %s lost leadership", self.holder)
        elif self.lease is None:
            log.info("supervisor %s leads (epoch %d)", self.holder, lease.epoch)
            self._became_leader.set()  # scan at once: the old leader's work waits
        self.lease = lease
        self._renewed_at = None if lease is None else self.clock.monotonic()
        return lease

    async def _last_failure(self, task: Task) -> str:
        """What the agents last said about the task, for an escalation's reason."""
        for event in reversed(await self.store.task_events(task.id)):
            detail = event.detail if isinstance(event.detail, dict) else {}
            where = f"step {detail.get('seq')} ({detail.get('agent')})"
            if event.kind == EventKind.STEP_TIMED_OUT:
                return f"; last: {where} was cancelled at complete_by"
            if event.kind == EventKind.STEP_GAVE_UP:
                error = detail.get("error") or {}
                return (
                    f"; last: {where} gave up after {detail.get('tries')} tries: "
                    f"{error.get('type')}: {error.get('message')}"
                )
            if event.kind in (EventKind.CLAIMED, EventKind.RETRIED):
                break
        return ""

    async def _dead_owners(self, tasks: list[Task]) -> set[str]:
        """The owners (instances) of `tasks`' claims that the worker registry deems dead."""
        owners = sorted({instance_of(t.locked_by) for t in tasks if t.locked_by})
        if not owners:
            return set()
        return await self.store.dead_workers(owners, ttl=self.settings.worker_ttl)

    async def scan_once(self) -> int:
        """One scan: renew leadership, cancel tasks past their deadline (`deadlines`),
        fire schedules' and reminders' due ticks (`schedules`, `reminders`), attribute
        crashes, then handle
        every expired claim.

        An expired claim is charged to its task only when nothing else explains
        it: one held by a silent process waits for the registry's verdict
        (`Expiry.silent`), one whose step waited in probation or that expired
        in a store outage is reset without a failure counted.
        Returns how many expired claims were handled.
        """
        lease = self._fresh_lease() or await self.renew()
        if lease is None:
            return 0
        self.scans += 1
        self.deadlines += await cancel_overdue(self.store, lease)
        self.fired += await fire_schedules(self.store, grace=grace_of(self.interval, self.ttl))
        reminded, self._next_reminder = await fire_reminders(self.store)
        self.reminded += reminded
        expired, held = await self._expired()
        workers = await self.store.unreaped_workers()
        stalled = {i for t in expired for i in _holders(t, held)}
        if await self.attribute_crashes(lease, stalled=stalled, workers=workers):
            expired, held = await self._expired()
        if not expired:
            return 0
        now = self.store.now()
        # The last beat of each live process: a claim is charged only once every
        # process holding it has been seen alive after it expired.
        beats = {
            w.instance: w.beat_at
            for w in workers
            if w.state(now=now, ttl=self.settings.worker_ttl) is WorkerState.ALIVE
        }
        pending = [
            (
                t,
                on_claim_expired(
                    t,
                    self.policy_for(t.workflow),
                    Expiry(
                        silent=self._unseen(t, _holders(t, held), beats, now),
                        probation=_in_probation(t, held),
                        recovery=self._recovering(t, held),
                        outage=self.forgives(t),
                        running=_running(t, held, now),
                    ),
                    now=now,
                    rng=self.rng,
                ),
            )
            for t in expired
        ]
        decided = [(t, d) for t, d in pending if d is not None]
        # Every decision says whether the claim's owner process is still alive (the
        # worker registry); an escalation also says what the agents last reported.
        dead = await self._dead_owners([t for t, _ in decided])
        decided = [
            (t, replace(d, reason=d.reason + _owner_note(t, dead)))
            if isinstance(d, Reset)
            else (
                t,
                replace(d, reason=d.reason + _owner_note(t, dead) + await self._last_failure(t)),
            )
            for t, d in decided
        ]
        applied = await asyncio.gather(
            *(self.store.apply_supervision(t, d, leader=lease) for t, d in decided)
        )
        for (task, decision), ok in zip(decided, applied, strict=True):
            if not ok:
                continue
            task_event(
                task.id, task.workflow, event_kind(decision), decision.reason, epoch=task.lock_epoch
            )
            if isinstance(decision, Reset):
                self.resets += 1
                self.metrics.supervisor_resets.labels(task.workflow, "expired").inc()
                if decision.failure_count == task.failure_count:
                    self.forgiven += 1
            elif isinstance(decision, Escalate):
                self.escalations += 1
                self.metrics.supervisor_escalations.labels(task.workflow, "expired").inc()
                self.raise_alert(task, reason=decision.reason, failure_count=decision.failure_count)
            else:
                self.compensations += 1
                self.metrics.supervisor_compensations.labels(task.workflow).inc()
        return sum(applied)

    def _unseen(
        self, task: Task, holders: set[str], beats: dict[str, datetime], now: datetime
    ) -> bool:
        """Whether a process holding `task`'s expired claim has not been seen alive since.

        It has not beaten since the claim expired, or has missed its beats, or a
        freeze of it was seen and is not attributed yet (the store was out
        meanwhile): the registry's verdict comes first.
        """
        for holder in holders:
            if holder in self._frozen:
                return True
            beat_at = beats.get(holder)
            if beat_at is not None and (
                task.complete_by is None
                or beat_at <= task.complete_by
                or is_silent(beat_at, now=now, beat=self.settings.worker_beat)
            ):
                return True
        return False

    def _recovering(self, task: Task, held: Held) -> bool:
        """Whether a step of `task`'s claim has waited, untaken, since before a recovery."""
        last = self._recovered_at
        return last is not None and any(
            not r.taken_by and r.created_at <= last for r in held.get(task.id, ())
        )

    async def _expired(self) -> tuple[list[Task], Held]:
        """The expired claims, and the requests of their claims, queued or taken, by task."""
        expired = await self.store.expired_claims(limit=1000)
        held: Held = {}
        if expired:
            epochs = {t.id: t.lock_epoch for t in expired}
            for request in await self.store.held_requests(list(epochs)):
                if request.lock_epoch == epochs[request.task_id]:
                    held.setdefault(request.task_id, []).append(request)
        return expired, held


#: The requests of each expired claim (its epoch's), queued or taken, by task id.
Held = dict[str, list["HeldRequest"]]


def _holders(task: Task, held: Held) -> set[str]:
    """The processes holding `task`'s claim: its owner, and those running its steps."""
    holders = {instance_of(r.taken_by) for r in held.get(task.id, ()) if r.taken_by}
    if task.locked_by:
        holders.add(instance_of(task.locked_by))
    return holders


def _in_probation(task: Task, held: Held) -> bool:
    """Whether a step of `task`'s claim is a suspect's still waiting, untaken, to run apart."""
    return any(r.suspect and not r.taken_by for r in held.get(task.id, ()))


def _running(task: Task, held: Held, now: datetime) -> bool:
    """Whether a step of `task`'s claim is taken and still inside its own window."""
    return any(r.taken_by and r.complete_by > now for r in held.get(task.id, ()))


def _owner_note(task: Task, dead: set[str]) -> str:
    """`; owner ... is dead` when the worker registry says so, else nothing."""
    if not task.locked_by:
        return ""
    owner = instance_of(task.locked_by)
    if owner in dead:
        return f"; its owner {owner} is dead (stopped, or no beat within worker_ttl)"
    return ""
