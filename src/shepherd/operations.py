"""What an operator reads and does: tasks, retry and cancel, alerts, tokens, the overview, resources.

`app.operations` is the operator's side of an App: the CLI's operator
commands, `shepherd top` and the dashboard use it, and nothing else of the
App. Each method opens the store on first use, then reads or writes it
through the store contract (one short transaction each, a few for the
overview's reads). The App keeps the methods its users call (`get_task`,
`list_tasks`, `history`, `retry`, `cancel`, `alerts`, ...) as calls of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, Unpack, final

from shepherd.core.bulk import MAX_BULK
from shepherd.core.overview import Operator, ThroughputBucket, bucket_starts, fill
from shepherd.core.retention import cutoff
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, UnknownTaskError
from shepherd.governance.moves import checked_move, move_partition
from shepherd.scheduling import ScheduleOperations
from shepherd.store import signals as ch
from shepherd.store.cursor import TaskCursor
from shepherd.store.operator_rows import MAX_SEQ, checked_buckets
from shepherd.store.ops.bulk import IdempotencyKey, StoredReply
from shepherd.store.ops.tasks import TaskFilters
from shepherd.store.signals import Signals
from shepherd.supervisor.retention import Purged, purge
from shepherd.supervisor.supervisor import LEASE

if TYPE_CHECKING:
    import asyncio

    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.alerts import AlertState, StoredAlert
    from shepherd.core.breaker import Breaker, BreakerEvent
    from shepherd.core.bulk import BulkOutcome, TaskCount
    from shepherd.core.moves import PartitionMove
    from shepherd.core.records import Event, JsonValue, Lease, Task
    from shepherd.core.resources import Partition, Resource, ResourceChange
    from shepherd.core.workers import Worker
    from shepherd.store.contract import Store

__all__ = [
    "MAX_SEQ",
    "Host",
    "IdempotencyKey",
    "Operations",
    "Purged",
    "StoredReply",
    "TaskCursor",
    "TaskFilters",
    "unknown_task",
]


class Host(Protocol):
    """What operations need of an App: its store, settings and clock, and its life cycle."""

    settings: Settings
    clock: Clock

    @property
    def store(self) -> Store:
        """The state store (opened by `open`)."""

    @property
    def workflows(self) -> Mapping[str, object]:
        """The registered workflows, by name."""

    async def open(self) -> object:
        """Open the store (idempotent)."""

    async def close(self) -> None:
        """Close the store."""


async def unknown_task(store: Store, task_id: str) -> UnknownTaskError:
    """The error for a task id the store does not hold: purged (when it says so), or unknown."""
    tombstone = await store.get_tombstone(task_id)
    if tombstone is None:
        return UnknownTaskError(task_id)
    return UnknownTaskError(
        task_id, process_state=str(tombstone.process_state), purged_at=tombstone.purged_at
    )


@final
class Operations:
    """The operator's reads and actions over the store of `host` (an App)."""

    def __init__(self, host: Host) -> None:
        self._host = host
        #: Schedules: list, add, change, pause, resume, trigger (`shepherd.scheduling`).
        self.schedules = ScheduleOperations(lambda: host.store, self.open, host.workflows)

    @property
    def settings(self) -> Settings:
        """The App's settings (`worker_ttl`, `store`...)."""
        return self._host.settings

    async def open(self) -> Operations:
        """Open the store (idempotent): as the App opens it (`App.migrate`)."""
        await self._host.open()
        return self

    async def close(self) -> None:
        """Close the App: its store, after its alerts in flight and `on_close` hooks."""
        await self._host.close()

    def now(self) -> datetime:
        """The store's clock (the instants it stores and compares)."""
        return self._host.store.now()

    # -- tasks ---------------------------------------------------------------
    async def find_task(self, task_id: str) -> Task | None:
        """The task with its steps, or None when the store holds no task of that id."""
        await self.open()
        return await self._host.store.get_task(task_id)

    async def get_task(self, task_id: str) -> Task:
        """The task with its steps.

        Raises:
            UnknownTaskError: No such task; the message says when a task of
                that id ended and was purged by retention.
        """
        task = await self.find_task(task_id)
        if task is None:
            raise await unknown_task(self._host.store, task_id)
        return task

    async def list_tasks(self, *, limit: int = 100, **filters: Unpack[TaskFilters]) -> list[Task]:
        """Tasks, newest first by (created_at, id), without their steps.

        Every filter given must match (`TaskFilters`): one of `states` (any when
        empty), the `workflow`, the business `key`, an id starting with
        `id_prefix`, changed at or after `updated_since`, created in
        [`created_from`, `created_to`). `before` continues after a page:
        `TaskCursor.of(page[-1])` lists the next, older tasks (keyset pagination:
        any page costs what the first does).

        Raises:
            ConfigError: A filter is malformed (a text with a NUL, a time
                without a time zone, ...); nothing is read.
        """
        await self.open()
        return await self._host.store.list_tasks(limit=limit, **filters)

    async def history(self, task_id: str) -> list[Event]:
        """A task's events, oldest first."""
        await self.open()
        return await self._host.store.task_events(task_id)

    async def count_tasks(self) -> dict[ProcessState, int]:
        """How many tasks are in each `process_state` (states without tasks are absent)."""
        await self.open()
        return await self._host.store.count_tasks()

    async def retry(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        """Put an `error` task back to work from its failed step (or step `seq`).

        `payload` replaces step `seq`'s request; `by`, who retries it, is
        recorded in the task's `retried` event, and so is the payload replaced
        (`"replaced"`).
        """
        await self.open()
        return await self._host.store.retry_task(task_id, seq=seq, payload=payload, by=by)

    async def cancel(self, task_id: str, *, by: str | None = None) -> Task:
        """Undo a task that has not ended: compensated, then `cancelled` (`by` in its event)."""
        await self.open()
        return await self._host.store.cancel_task(task_id, by=by)

    async def wake(self, task_id: str, *, by: str | None = None) -> None:
        """Wake a sleeping task (`ctx.sleep`) now, `by` in its `woken` event; else InvalidStateError."""
        await self.open()
        await self._host.store.wake_task(task_id, by=by)

    # -- alerts ----------------------------------------------------------------
    async def alerts(
        self,
        *,
        open_only: bool = False,
        limit: int = 100,
        task_id: str | None = None,
        state: AlertState | str | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredAlert]:
        """The stored operator alerts, newest first: only those in `state` (`open`,
        `acknowledged`, `resolved`; None or `all`: every one; `open_only` is
        `state="open"`), only those of the task `task_id` if given. Pages: those
        older than alert `before`, or the oldest ones newer than alert `after`.

        An alert is stored in the transaction that moves its task into `error`,
        so it is listed even when its process died before the sinks were told;
        it resolves in the transaction that ends its task well.

        Raises:
            ConfigError: `limit` is not a whole number of at least 1, `state`
                is not a state, a cursor is not an alert's id, or both are given.
        """
        await self.open()
        return await self._host.store.list_alerts(
            open_only=open_only,
            limit=limit,
            task_id=task_id,
            state=state,
            before=before,
            after=after,
        )

    async def count_alerts(self, *, state: AlertState | str | None = None) -> int:
        """How many alerts are stored: those in `state` only if given (`open` for the overview).

        Raises:
            ConfigError: `state` is not a state (nor `all`).
        """
        await self.open()
        return await self._host.store.count_alerts(state=state)

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """Acknowledge a stored alert by `by` (who handles it); the alert as stored.

        An alert acknowledged already keeps its first acknowledgement, which
        is returned. Acknowledging does not change the task: retry or cancel it.

        Raises:
            UnknownAlertError: No alert has that id.
            ConfigError: `by` is empty (or not a str, or too long); nothing is written.
        """
        await self.open()
        return await self._host.store.acknowledge_alert(alert_id, by=by)

    # -- triage in bulk ------------------------------------------------------------
    async def count_matching(
        self, *, cap: int = MAX_BULK, **filters: Unpack[TaskFilters]
    ) -> TaskCount:
        """How many tasks match every filter (as `list_tasks` takes them, `before` aside).

        Exact up to `cap` (10,000 by default); past it, `more` is set and the
        count is `cap`. Reads at most `cap` + 1 entries of the index the list
        itself reads, however many tasks match.

        Raises:
            ConfigError: A filter is malformed, or `cap` is not from 1 to 100,000.
        """
        await self.open()
        return await self._host.store.count_matching(cap=cap, **filters)

    async def matching_task_ids(
        self, *, limit: int = MAX_BULK, **filters: Unpack[TaskFilters]
    ) -> list[str]:
        """The ids of at most `limit` tasks matching every filter, newest first (as `list_tasks`)."""
        await self.open()
        return await self._host.store.matching_task_ids(limit=limit, **filters)

    async def retry_many(
        self, task_ids: Sequence[str], *, by: str | None, key: IdempotencyKey | None = None
    ) -> BulkOutcome:
        """Retry each of `task_ids` in `error` from its failed step, with its own payloads.

        One write for them all; a task whose state changed since its id was
        chosen (no longer in `error`, purged) is refused with why, and the
        others go on. Each `retried` event records `by` and the bulk action
        (`"bulk": id, "of": N`). With `key` (a script's `Idempotency-Key`),
        a second request with the same key changes nothing and returns the
        first one's outcome (`replayed`).

        Raises:
            ConfigError: More than 10,000 ids (`MAX_BULK`), an id or `by`
                malformed, or `key` first used for another request; nothing changes.
        """
        await self.open()
        return await self._host.store.retry_tasks(task_ids, by=by, key=key)

    async def acknowledge_alerts_of(
        self, task_ids: Sequence[str], *, by: str, key: IdempotencyKey | None = None
    ) -> BulkOutcome:
        """Acknowledge the open alerts of each of `task_ids`, by `by`, in one write.

        A task without an open alert is refused; each other one gets an
        `alert_acknowledged` event with `by` and the bulk action. `key` as for
        `retry_many`.

        Raises:
            ConfigError: As for `retry_many`, or `by` is empty.
        """
        await self.open()
        return await self._host.store.acknowledge_alerts_of(task_ids, by=by, key=key)

    async def bulk_reply(self, key: str) -> StoredReply | None:
        """What the idempotency key `key` was first used for, and its outcome; None if unused."""
        await self.open()
        return await self._host.store.bulk_reply(key)

    # -- operators' tokens -------------------------------------------------------
    async def add_operator(self, name: str) -> str:
        """Make a named operator token; return the token (only its hash is stored: show it once).

        Raises:
            ConfigError: `name` is not 1 to 64 ASCII letters, digits and `._@-`
                (from a letter or digit).
            OperatorExistsError: An operator has that name already.
        """
        await self.open()
        return await self._host.store.add_operator(name)

    async def operators(self) -> list[Operator]:
        """The named operators, by name, with when each was made and last used."""
        await self.open()
        return await self._host.store.list_operators()

    async def remove_operator(self, name: str) -> None:
        """Delete an operator: its token opens nothing from then on.

        Raises:
            UnknownOperatorError: No operator has that name.
        """
        await self.open()
        await self._host.store.remove_operator(name)

    async def authenticate(self, token: str) -> str | None:
        """The name of the operator whose token `token` is, or None."""
        await self.open()
        return await self._host.store.authenticate(token)

    # -- the overview --------------------------------------------------------------
    async def throughput(
        self, *, window: timedelta = timedelta(hours=1), bucket: timedelta = timedelta(minutes=1)
    ) -> list[ThroughputBucket]:
        """The tasks that ended over the last `window`, per `bucket`, oldest first.

        Buckets are aligned on multiples of `bucket` (store clock); the last
        holds now. A task counts once, by when it ended and how (a task in
        `error` that is retried leaves its bucket).

        Raises:
            ConfigError: `window` or `bucket` is not positive, or the window
                holds more than 10,000 buckets.
        """
        step = checked_buckets(window, bucket)
        await self.open()
        store = self._host.store
        starts = bucket_starts(store.now(), window, bucket)
        return fill(starts, await store.ended_counts(since=starts[0], bucket=step))

    async def leader(self) -> Lease | None:
        """The supervisor leader's lease (holder, epoch, expiry); None when no one leads now."""
        await self.open()
        store = self._host.store
        lease = await store.get_lease(LEASE)
        return lease if lease is not None and lease.expires_at > store.now() else None

    async def breakers(self) -> list[Breaker]:
        """The circuit breaker of every remote service, shared through the store, by service."""
        await self.open()
        return await self._host.store.list_breakers()

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        """The latest breaker state changes (of one `service`, or all), newest first."""
        await self.open()
        return await self._host.store.breaker_events(service=service, limit=limit)

    async def latest_breaker_events(self, services: Sequence[str]) -> dict[str, BreakerEvent]:
        """The latest state change of each of `services`' breakers, by service (one read)."""
        await self.open()
        return await self._host.store.latest_breaker_events(services)

    async def workers(self, *, since: timedelta = timedelta(hours=1)) -> list[Worker]:
        """The worker registry: live processes, and those that stopped or died within `since`.

        Raises:
            ConfigError: `since` is not a timedelta.
        """
        if not isinstance(since, timedelta):
            raise ConfigError("since", f"must be a timedelta, not {since!r}")
        await self.open()
        store = self._host.store
        try:  # never less than the ttl: every live process has beaten since then
            start: datetime | None = store.now() - max(
                since, timedelta(seconds=self.settings.worker_ttl)
            )
        except OverflowError:  # further back than datetime goes: everything
            start = None
        return await store.list_workers(since=start)

    # -- retention -------------------------------------------------------------------
    async def purge(self, *, older_than: timedelta) -> tuple[Purged, datetime | None]:
        """Delete the tasks that ended `older_than` ago or more, and expired key tombstones.

        One pass to the end, `purge_batch` rows per transaction; tombstones go
        after `key_retention`. Returns what went, and the instant the tasks
        ended before (None: none is that old).
        """
        await self.open()
        store = self._host.store
        settings = self.settings
        now = store.now()
        ended_before = cutoff(now, older_than.total_seconds())
        done = await purge(
            store,
            ended_before=ended_before,
            purged_before=cutoff(now, settings.key_retention),
            batch=settings.purge_batch,
        )
        return done, ended_before

    # -- resources and partitions ----------------------------------------------------
    async def resolver_version(self) -> int:
        """The resolver's version: every change to resources, partitions or entities moves it."""
        await self.open()
        return await self._host.store.resolver_version()

    async def resources(self) -> list[Resource]:
        """Every resource, by name."""
        await self.open()
        return await self._host.store.list_resources()

    async def add_resource(self, resource: Resource) -> Resource:
        """Add `resource` (ResourceExistsError if its name is taken)."""
        await self.open()
        return await self._host.store.add_resource(resource)

    async def set_resource(self, name: str, change: ResourceChange) -> Resource:
        """Change the fields `change` gives; the resource as stored (UnknownResourceError)."""
        await self.open()
        return await self._host.store.set_resource(
            name, kind=change.kind, info=change.info, capacity=change.capacity, rate=change.rate
        )

    async def remove_resource(self, name: str) -> Resource:
        """Remove a resource no partition lives on; the resource it was."""
        await self.open()
        return await self._host.store.remove_resource(name)

    async def partitions(self) -> list[Partition]:
        """Every partition, by name, with its resource and how many entities it holds."""
        await self.open()
        return await self._host.store.list_partitions()

    async def move_partition(self, partition: str, resource: str) -> tuple[Partition, str | None]:
        """Put `partition` on `resource` (creating it if new); the resource it was on before."""
        await self.open()
        return await self._host.store.move_partition(partition, resource)

    async def drain_and_move_partition(
        self,
        partition: str,
        resource: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - when it passes the move is made, nothing is cancelled
        now: bool = False,
    ) -> PartitionMove:
        """Move `partition` to `resource` once its steps in flight have ended (`App.move_partition`)."""
        checked_move(partition, timeout=timeout, now=now)
        await self.open()
        host = self._host
        return await move_partition(
            host.store, host.clock, partition, resource, timeout=timeout, now=now
        )

    async def assign_entity(self, entity: str, partition: str) -> str | None:
        """Put `entity` in `partition`; the partition it was in before, or None."""
        await self.open()
        return await self._host.store.assign_entity(entity, partition)

    async def unassign_entity(self, entity: str) -> str | None:
        """Take `entity` out of its partition; the partition it was in, or None."""
        await self.open()
        return await self._host.store.unassign_entity(entity)

    # -- live views ----------------------------------------------------------------
    def changed(self, *, task_id: str | None = None) -> asyncio.Event:
        """The event the next change sets: of the task `task_id`, else of any task's history.

        Take it *before* reading, and wait on it (`wait_changed`) after: a
        change between the read and the wait is then never missed. Writes of
        other processes set it through the store's wake-ups.
        """
        channel = ch.EVENTS if task_id is None else ch.task_channel(task_id)
        return self._host.store.signals.event(channel)

    @staticmethod
    async def wait_changed(event: asyncio.Event, timeout: float) -> bool:  # noqa: ASYNC109 - a poll bound, not a cancel scope
        """Wait for `event` (from `changed`) at most `timeout` seconds; True if it was set."""
        return await Signals.wait(event, timeout)
