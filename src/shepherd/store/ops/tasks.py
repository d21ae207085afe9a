"""Tasks as the application and the operator see them: submit, look up, list, count, retry, cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace
from datetime import UTC, datetime
from typing import TypedDict, Unpack

from shepherd.core.records import JsonValue, Task
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError
from shepherd.store.cursor import TaskCursor
from shepherd.store.operator_rows import checked_actor, checked_seq
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "MAX_FILTER_CHARS",
    "CancelTask",
    "CountTasks",
    "CountTasksIn",
    "EndedCounts",
    "GetTask",
    "ListTasks",
    "NewTask",
    "RetryTask",
    "SubmitTask",
    "SubmitTasks",
    "Submitted",
    "TaskFilters",
    "Tasks",
    "WakeTask",
    "checked_listing",
]

#: The most characters a text filter (workflow, key, id prefix) may have.
MAX_FILTER_CHARS = 1000
#: The largest LIMIT both backends take (a signed 64-bit integer).
_MAX_LIMIT = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """What `submit_task` inserts."""

    workflow: str
    input: JsonValue
    key: str | None = None
    reply_to: str | None = None
    complete_within: float = 30.0
    #: The submitter's trace context (`shepherd.tracing`), or None when not traced.
    trace: str | None = None
    #: Claimable no earlier than this instant (checked: `core.timing`), or None for
    #: the submit's instant plus `delay`.
    not_before: datetime | None = None
    #: Seconds after the submit (on the store's clock) before it may be claimed.
    delay: float = 0.0
    #: Seconds after its `not_before` by which it must have ended, or None for no deadline.
    deadline: float | None = None

    @property
    def timed(self) -> bool:
        """Whether it is put off or has a deadline (not a plain submit)."""
        return self.not_before is not None or self.delay != 0 or self.deadline is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """The outcome of `submit_task`."""

    task_id: str
    created: bool


@operation
class SubmitTask(Write[Submitted]):
    """Insert a pending task and its `received` event (idempotent per key).

    A `key` already used for the same workflow creates nothing and returns the
    existing task's id (a purged task's too, while its tombstone lasts).
    """

    task: NewTask


@operation
class SubmitTasks(Write[list[Submitted]]):
    """Insert pending tasks and their `received` events in ONE transaction: all or none.

    One outcome per task, in order, as `submit_task` gives it; a key
    repeated within `tasks` (same workflow) gives the first one's task to
    each (`created` only for the first). Every input is encoded before
    anything is written: one refused (`PayloadError`, its message starting
    `submissions[i]:`) writes none of them. Roles are woken once.
    """

    tasks: Sequence[NewTask]


@operation
class GetTask(Read[Task | None]):
    """The task with its steps, or None."""

    task_id: str


class TaskFilters(TypedDict, total=False):
    """What `list_tasks` may filter on (every filter given must match)."""

    #: Any of these states (no filter when empty).
    states: Sequence[ProcessState]
    workflow: str | None
    key: str | None
    #: Ids starting with this.
    id_prefix: str | None
    #: Last changed at or after this.
    updated_since: datetime | None
    #: Created at or after this.
    created_from: datetime | None
    #: Created before this.
    created_to: datetime | None
    #: Only tasks after this one in the listing's order (older): the next page.
    before: TaskCursor | None


@operation
class ListTasks(Read[list[Task]]):
    """Newest first by (created_at, id), without steps: at most `limit` tasks matching every filter.

    `states` (when not empty), `workflow` and `key` must match; `id_prefix`
    keeps tasks whose id starts with it; `updated_since` those last changed
    at or after it; `created_from` and `created_to` those created in
    [created_from, created_to); `before` (a `TaskCursor`) those after that
    task in this order: the next page (keyset pagination). Every filter is
    served by an index in this order (`shepherd.store.task_filters`).

    Raises:
        ConfigError: A filter is of the wrong type, a text filter holds a
            NUL, or a time has no time zone; nothing is read.
    """

    _: KW_ONLY
    limit: int = 100
    states: Sequence[ProcessState] = ()
    workflow: str | None = None
    key: str | None = None
    id_prefix: str | None = None
    updated_since: datetime | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before: TaskCursor | None = None


@operation
class CountTasks(Read[dict[ProcessState, int]]):
    """How many tasks are in each state."""


@operation
class CountTasksIn(Read[dict[ProcessState, int]]):
    """How many tasks are in each of `states` (states without tasks are absent).

    Reads the index range of those states only: cheap for the states a task
    passes through or waits in (`pending`, `processing`, `compensating`,
    `error`), whatever the number of ended tasks.
    """

    states: Sequence[ProcessState]


@operation
class EndedCounts(Read[dict[tuple[int, ProcessState], int]]):
    """How many tasks ended at or after `since`, by (slice index, state ended in).

    A task counts by its `updated_at` (when it ended) and its state:
    `processed`, `error`, `compensated` or `cancelled`; slice i holds
    [since + i*bucket, since + (i+1)*bucket), `bucket` in seconds.
    """

    _: KW_ONLY
    since: datetime
    bucket: float


@operation
class RetryTask(Write[Task]):
    """An `error` task back to pending from its failed step (or step `seq`).

    `by`, who retries it, is recorded in the `retried` event's detail, and so
    is the payload a new `payload` replaces (`"replaced"`, as stored; one over
    the store's payload limit as `{"truncated": true, "bytes": N}`). The
    `started` done-key marks of the steps it puts back to work are removed
    (keys `task_id/seq` and `task_id/seq/...`).
    """

    task_id: str
    _: KW_ONLY
    seq: int | None = None
    payload: JsonValue = None
    #: Who retries it (recorded in the event's detail as "by"), or None.
    by: str | None = None


@operation
class CancelTask(Write[Task]):
    """Ask for compensation of a task that has not ended; it ends `cancelled`.

    `by`, who cancels it, is recorded in the `cancel_requested` event's detail.
    """

    task_id: str
    _: KW_ONLY
    #: Who cancels it (recorded in the event's detail as "by"), or None.
    by: str | None = None


@operation
class WakeTask(Write[None]):
    """Wake a sleeping task now: its sleep step's wake-up and its `not_before` become now.

    Sleeping: `pending`, unowned, its latest sleep step's wake-up still ahead
    (`core.sleeping`). Otherwise `InvalidStateError` (or `UnknownTaskError`)
    and nothing changes. `by` is recorded in the `woken` event's detail.
    """

    task_id: str
    _: KW_ONLY
    #: Who wakes it (recorded in the event's detail as "by"), or None.
    by: str | None = None


class Tasks(Runs):
    """The store's methods for tasks as the application and the operator see them."""

    submit_task = method(SubmitTask)
    get_task = method(GetTask)
    count_tasks = method(CountTasks)
    count_tasks_in = method(CountTasksIn)
    ended_counts = method(EndedCounts)

    async def submit_tasks(self, tasks: Sequence[NewTask]) -> list[Submitted]:
        """`SubmitTasks`; none at all writes nothing."""
        if not tasks:
            return []
        return await self.write(SubmitTasks(tuple(tasks)))

    async def list_tasks(self, *, limit: int = 100, **filters: Unpack[TaskFilters]) -> list[Task]:
        """`ListTasks`, its filters checked first (`checked_listing`)."""
        return await self.read(checked_listing(ListTasks(limit=limit, **filters)))

    async def retry_task(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        """`RetryTask`, `seq` and `by` checked first (`checked_seq`, `checked_actor`)."""
        return await self.write(
            RetryTask(task_id, seq=checked_seq(seq), payload=payload, by=checked_actor(by))
        )

    async def cancel_task(self, task_id: str, *, by: str | None = None) -> Task:
        """`CancelTask`, `by` checked first (`checked_actor`)."""
        return await self.write(CancelTask(task_id, by=checked_actor(by)))

    async def wake_task(self, task_id: str, *, by: str | None = None) -> None:
        """`WakeTask`, `by` checked first (`checked_actor`)."""
        await self.write(WakeTask(task_id, by=checked_actor(by)))


def checked_listing(op: ListTasks) -> ListTasks:
    """`op` if every filter it gives can be read by both backends.

    Raises:
        ConfigError: A text filter is not a str, is too long or holds a NUL or
            a lone surrogate; a time is not an aware datetime; `before` is not
            a `TaskCursor`; a state is not a `ProcessState`; `limit` is not a
            whole number (the field says which).
    """
    for field, text in (("workflow", op.workflow), ("key", op.key), ("id_prefix", op.id_prefix)):
        if text is None:
            continue
        if not isinstance(text, str):
            raise ConfigError(field, f"a filter is a str, not {type(text).__name__}")
        if len(text) > MAX_FILTER_CHARS:
            raise ConfigError(
                field, f"{text[:40]!r}... is longer than {MAX_FILTER_CHARS} characters"
            )
        if any(c == "\0" or 0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise ConfigError(field, f"{text[:40]!r} holds a NUL or a lone surrogate")
    for field, at in (
        ("updated_since", op.updated_since),
        ("created_from", op.created_from),
        ("created_to", op.created_to),
    ):
        if at is None:
            continue
        if not isinstance(at, datetime) or at.utcoffset() is None:
            raise ConfigError(field, f"a time with its time zone is needed, not {at!r}")
        try:
            at.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+14:00 is in the year 0
            raise ConfigError(field, f"{at.isoformat()} is out of range in UTC") from None
    if op.before is not None and not isinstance(op.before, TaskCursor):
        raise ConfigError("before", f"a TaskCursor is needed, not {type(op.before).__name__}")
    limit = op.limit
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigError("limit", f"must be a whole number, not {limit!r}")
    states = []
    for state in op.states:
        try:
            states.append(ProcessState(state))
        except ValueError:
            raise ConfigError("states", f"{state!r} is not a process_state") from None
    # Past what a store's LIMIT holds is as good as no limit (a negative one).
    return replace(op, states=tuple(states), limit=-1 if limit > _MAX_LIMIT else limit)
