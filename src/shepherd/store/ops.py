"""The store's operations as typed values: one frozen dataclass per operation.

An operation names what it needs and, through its type parameter, what it
returns: `ClaimTasks(owner, limit)` is an `Op[list[Task]]`, so
`await facade.run(ClaimTasks(...))` is a `list[Task]` to mypy. A `Write` is
group-committed (many callers' writes, one transaction); a `Read` runs on a
read connection. Each backend keeps one table from operation type to handler
(`shepherd.store.sqlite.handlers`, `shepherd.store.postgres.handlers`), and
`shepherd.store.facade.Facade` turns the contract's methods into operations
for both. How to add one: docs/design.md, "How to add a store operation".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar, dataclass_transform

from shepherd.core.alerts import StoredAlert
from shepherd.core.breaker import Breaker, BreakerEvent
from shepherd.core.breaker import Decision as BreakerDecision
from shepherd.core.overview import Operator
from shepherd.core.ownership import KeyLease, TakenKey
from shepherd.core.records import (
    CallAnswer,
    CallRequest,
    Event,
    JsonValue,
    Lease,
    QueueDepth,
    Reply,
    Request,
    Task,
)
from shepherd.core.resources import (
    Partition,
    Resolution,
    Resource,
    ResourceChange,
    Slot,
    SlotLease,
)
from shepherd.core.retention import Tombstone
from shepherd.core.states import ProcessState
from shepherd.core.workers import Worker
from shepherd.store.contract import HeldRequest, NewTask, StepStart, Submitted
from shepherd.store.cursor import TaskCursor

if TYPE_CHECKING:
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.supervision import Decision, Escalate, Reset

R = TypeVar("R", covariant=True)

__all__ = [
    "AbandonOnce",
    "AcknowledgeAlert",
    "AcquireLease",
    "AcquireSlots",
    "AddOperator",
    "AddResource",
    "AnswerAndTake",
    "AnswerCall",
    "AnswerOwned",
    "ApplyCrash",
    "ApplySupervision",
    "AssignEntity",
    "BeatWorker",
    "BeginOnce",
    "BreakerAllow",
    "BreakerEvents",
    "BreakerReport",
    "CancelTask",
    "ClaimTasks",
    "CountTasks",
    "CountTasksIn",
    "CountWorkflowTasks",
    "CrashVictims",
    "DeadWorkers",
    "DeclareResource",
    "EndedCounts",
    "ExpiredClaims",
    "ExtendStep",
    "FailTask",
    "FindOperator",
    "FinishOnce",
    "FinishTask",
    "GetAnswers",
    "GetBreaker",
    "GetLease",
    "GetTask",
    "GetTombstone",
    "HeldRequests",
    "KeyBacklog",
    "KeyBacklogs",
    "ListAlerts",
    "ListBreakers",
    "ListKeyLeases",
    "ListOperators",
    "ListPartitions",
    "ListResources",
    "ListSlots",
    "ListTasks",
    "ListWorkers",
    "MarkDied",
    "MovePartition",
    "NextDue",
    "Note",
    "Op",
    "PurgeCalls",
    "PurgeTasks",
    "PurgeTombstones",
    "QueueDepths",
    "Read",
    "ReadEvents",
    "ReapWorker",
    "RecordReplies",
    "RegisterWorker",
    "ReleaseKeys",
    "ReleaseLease",
    "ReleaseSlots",
    "ReleaseTasks",
    "RemoveOperator",
    "RemoveResource",
    "RenewKeys",
    "RenewSlots",
    "ReplyAndAck",
    "Resolve",
    "ResolverVersion",
    "RetryTask",
    "SendCall",
    "SetOwnerState",
    "SetResource",
    "StartCompensation",
    "StartStep",
    "StopWorker",
    "SubmitTask",
    "SubmitTasks",
    "TakeCalls",
    "TakeKeyCalls",
    "TakeKeys",
    "TakeRequests",
    "TakeTokens",
    "TaskEvents",
    "TaskFilters",
    "TouchOperator",
    "UnassignEntity",
    "UnreapedWorkers",
    "WaitingKeys",
    "Write",
]


class Op(Generic[R]):
    """A store operation whose outcome is an `R`."""

    __slots__ = ()


class Write(Op[R]):
    """An operation that changes the store: group-committed, fenced where it says so."""

    __slots__ = ()


class Read(Op[R]):
    """An operation that only reads (one statement or a few, no transaction of its own)."""

    __slots__ = ()


T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def _op(cls: type[T]) -> type[T]:
    """An operation's class: a frozen, slotted dataclass with keyword-only fields."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)


# -- application ---------------------------------------------------------------
@_op
class SubmitTask(Write[Submitted]):
    task: NewTask


@_op
class SubmitTasks(Write[list[Submitted]]):
    tasks: tuple[NewTask, ...]


@_op
class GetTask(Read[Task | None]):
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


@_op
class ListTasks(Read[list[Task]]):
    limit: int = 100
    states: Sequence[ProcessState] = ()
    workflow: str | None = None
    key: str | None = None
    id_prefix: str | None = None
    updated_since: datetime | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    before: TaskCursor | None = None


@_op
class CountTasks(Read[dict[ProcessState, int]]):
    pass


@_op
class QueueDepths(Read[list[QueueDepth]]):
    """Per agent, its requests and calls waiting and taken now, by agent name."""


@_op
class CountTasksIn(Read[dict[ProcessState, int]]):
    """How many tasks are in each of `states` (an index range per state, not the whole table)."""

    states: tuple[ProcessState, ...]


@_op
class CountWorkflowTasks(Read[dict[ProcessState, int]]):
    workflow: str


@_op
class TaskEvents(Read[list[Event]]):
    task_id: str


@_op
class ReadEvents(Read[list[Event]]):
    reply_to: str | None
    after_id: int
    limit: int = 1000


# -- scheduler -----------------------------------------------------------------
@_op
class NextDue(Read[datetime | None]):
    """When the earliest unclaimed task waiting for its `not_before` becomes claimable."""


@_op
class ClaimTasks(Write[list[Task]]):
    owner: str
    limit: int


@_op
class StartStep(Write[datetime | Request]):
    """Its complete_by; the `Request` itself when `start.taken_by` took it as it was queued."""

    start: StepStart


@_op
class RecordReplies(Write[list[tuple[Reply, bool]]]):
    owner: str
    limit: int


@_op
class FinishTask(Write[None]):
    task_id: str
    owner: str
    epoch: int
    result: JsonValue


@_op
class FailTask(Write[None]):
    task_id: str
    owner: str
    epoch: int
    state: ProcessState
    error: JsonValue


@_op
class StartCompensation(Write[None]):
    task_id: str
    owner: str
    epoch: int
    error: JsonValue


@_op
class ReleaseTasks(Write[int]):
    task_ids: tuple[str, ...]
    owner: str


# -- agent ---------------------------------------------------------------------
@_op
class TakeRequests(Write[list[Request]]):
    agents: tuple[str, ...]
    worker: str
    limit: int
    suspects: int = 0


@_op
class ReplyAndAck(Write[bool | Reply]):
    """Answer a request and remove it: False if it is no longer `worker`'s.

    True when the reply is queued for its task's scheduler; the `Reply` itself
    when `recorder` (the scheduler in the worker's own process) holds the task
    and the reply was recorded on its step in the same transaction.
    """

    request: Request
    worker: str
    ok: bool
    body: JsonValue
    #: A capacity slot the handling held, released in the same transaction.
    slot: Slot | None = None
    #: The owner name of the scheduler in the worker's process, if one runs there.
    recorder: str | None = None
    #: The trace context of the step span that answers (`shepherd.tracing`), or None.
    trace: str | None = None


@_op
class Note(Write[None]):
    task_id: str
    kind: str
    detail: JsonValue


@_op
class ExtendStep(Write[datetime | None]):
    request: Request
    worker: str


@_op
class BeginOnce(Write[tuple[str, JsonValue]]):
    key: str
    holder: str


@_op
class FinishOnce(Write[bool]):
    key: str
    holder: str
    result: JsonValue


@_op
class AbandonOnce(Write[bool]):
    key: str
    holder: str


@_op
class BreakerAllow(Write[tuple[Breaker, BreakerDecision]]):
    service: str
    policy: BreakerPolicy


@_op
class BreakerReport(Write[tuple[Breaker, Breaker]]):
    service: str
    policy: BreakerPolicy
    failed: bool


@_op
class GetBreaker(Read[Breaker | None]):
    service: str


@_op
class ListBreakers(Read[list[Breaker]]):
    pass


@_op
class BreakerEvents(Read[list[BreakerEvent]]):
    service: str | None = None
    limit: int = 50


# -- supervisor ----------------------------------------------------------------
@_op
class AcquireLease(Write[Lease | None]):
    name: str
    holder: str
    ttl: float


@_op
class ReleaseLease(Write[None]):
    name: str
    holder: str


@_op
class ExpiredClaims(Read[list[Task]]):
    limit: int


@_op
class ApplySupervision(Write[bool]):
    task: Task
    decision: Decision
    leader: Lease


# -- worker registry and crash attribution -------------------------------------
@_op
class RegisterWorker(Write[Worker]):
    instance: str
    host: str
    pid: int
    roles: tuple[str, ...]
    agents: tuple[str, ...]


@_op
class BeatWorker(Write[bool]):
    instance: str


@_op
class StopWorker(Write[None]):
    instance: str


@_op
class ListWorkers(Read[list[Worker]]):
    since: datetime | None = None


@_op
class DeadWorkers(Read[set[str]]):
    instances: tuple[str, ...]
    ttl: float


@_op
class UnreapedWorkers(Read[list[Worker]]):
    pass


@_op
class CrashVictims(Read[list[tuple[Task, bool, int | None]]]):
    instance: str
    beat_at: datetime


@_op
class HeldRequests(Read[list[HeldRequest]]):
    task_ids: tuple[str, ...]


@_op
class MarkDied(Write[bool]):
    instance: str


@_op
class ReapWorker(Write[None]):
    instance: str


@_op
class ApplyCrash(Write[bool]):
    task: Task
    decision: Reset | Escalate
    leader: Lease


# -- retention -----------------------------------------------------------------
@_op
class PurgeTasks(Write[int]):
    ended_before: datetime
    limit: int


@_op
class PurgeTombstones(Write[int]):
    purged_before: datetime
    limit: int


@_op
class GetTombstone(Read[Tombstone | None]):
    task_id: str


# -- operator ------------------------------------------------------------------
@_op
class RetryTask(Write[Task]):
    task_id: str
    seq: int | None = None
    payload: JsonValue = None
    #: Who retries it (recorded in the event's detail as "by"), or None.
    by: str | None = None


@_op
class CancelTask(Write[Task]):
    task_id: str
    #: Who cancels it (recorded in the event's detail as "by"), or None.
    by: str | None = None


# -- resource governance -------------------------------------------------------
# Every write that changes a resource, a partition or an assignment bumps the
# resolver's version once and rings RESOLVER; one that changes nothing does not.
@_op
class DeclareResource(Write[bool]):
    resource: Resource


@_op
class AddResource(Write[Resource]):
    resource: Resource


@_op
class SetResource(Write[Resource]):
    name: str
    change: ResourceChange


@_op
class RemoveResource(Write[Resource]):
    name: str


@_op
class ListResources(Read[list[Resource]]):
    pass


@_op
class MovePartition(Write[tuple[Partition, str | None]]):
    partition: str
    resource: str


@_op
class AssignEntity(Write[str | None]):
    entity: str
    partition: str


@_op
class UnassignEntity(Write[str | None]):
    entity: str


@_op
class ListPartitions(Read[list[Partition]]):
    pass


@_op
class Resolve(Read[tuple[Resolution | None, int]]):
    entity: str
    default_partition: str | None = None


@_op
class ResolverVersion(Read[int]):
    pass


# -- capacity ------------------------------------------------------------------
# A slot is a lease on one unit of a resource's capacity. Taking one locks the
# resource's row (PostgreSQL) or runs under the write lock (SQLite), so that at
# most `capacity` unexpired slots of a resource exist at any moment, cluster-wide.
@_op
class AcquireSlots(Write[tuple[list[str], int | None]]):
    """(granted holders, capacity): capacity None means no cap (nothing held)."""

    resource: str
    holders: tuple[str, ...]
    worker: str
    lease: float


@_op
class RenewSlots(Write[list[Slot]]):
    """Move every unexpired slot of `worker` `lease` seconds ahead; returns the renewed."""

    worker: str
    lease: float


@_op
class ReleaseSlots(Write[int]):
    slots: tuple[Slot, ...]


@_op
class ListSlots(Read[list[SlotLease]]):
    """The slots held (expired ones too, until a taker deletes them), oldest first."""

    resource: str | None = None


# -- exclusive owners ------------------------------------------------------------
@_op
class TakeKeys(Write[list[TakenKey]]):
    """Take (or renew) `keys` of an exclusive agent for `owner`, each for `lease` seconds.

    Returns the keys granted, in the order asked: a key that is free (never
    leased, released, or its lease expired) is taken with its epoch bumped; one
    `owner` holds live is renewed with its epoch kept; one another owner holds
    live is not granted.
    """

    agent: str
    keys: tuple[str, ...]
    owner: str
    lease: float


@_op
class RenewKeys(Write[list[KeyLease]]):
    """Move every live key lease of `owner` `lease` seconds ahead; returns the renewed."""

    owner: str
    lease: float


@_op
class ReleaseKeys(Write[int]):
    """Hand `keys` of `agent` back (epoch and state kept); how many `owner` still held."""

    agent: str
    keys: tuple[str, ...]
    owner: str


@_op
class SetOwnerState(Write[bool]):
    """Set a key's durable owner state, fenced: False for a stale owner.

    Refused unless `owner` holds the key at `epoch` and its lease is live.
    """

    agent: str
    key: str
    owner: str
    epoch: int
    state: JsonValue


@_op
class ListKeyLeases(Read[list[KeyLease]]):
    """The owned keys of `agent` (expired leases too), by key."""

    agent: str


# -- calls (app.call) ------------------------------------------------------------


@_op
class SendCall(Write[None]):
    """Store a call for `agent`'s processes (rings CALLS).

    `expires_in` seconds after now the row is deleted, answered or not.
    """

    call_id: str
    agent: str
    payload: JsonValue
    within: float
    max_attempts: int
    expires_in: float
    #: The owning key of a call to an exclusive agent (only its owner takes it), or None.
    owner_key: str | None = None


@_op
class TakeCalls(Write[tuple[list[CallRequest], list[CallRequest]]]):
    """Take up to `limit` waiting calls of `agents` for `worker`, oldest first.

    Returns (taken, given up): a call already handled `max_attempts` times is
    not taken but answered with an error (`core.calls.gave_up_body`).
    """

    worker: str
    agents: tuple[str, ...]
    limit: int


@_op
class AnswerCall(Write[bool]):
    """Answer a call, fenced: False unless `worker`'s handling `attempt` is its latest
    and the call is unanswered (rings ANSWERS)."""

    call_id: str
    worker: str
    attempt: int
    ok: bool
    body: JsonValue


@_op
class WaitingKeys(Read[list[str]]):
    """The owning keys of `agent`'s unanswered, unexpired calls, sorted."""

    agent: str


@_op
class KeyBacklogs(Read[dict[str, tuple[int, datetime]]]):
    """Of each key of `agent` with unanswered, unexpired calls: how many, and the oldest's send."""

    agent: str


@_op
class KeyBacklog(Read[tuple[int, datetime | None]]):
    """How many unanswered, unexpired calls one key has, and when the oldest was sent."""

    agent: str
    key: str


@_op
class TakeKeyCalls(Write[tuple[list[CallRequest], list[CallRequest]]]):
    """Take the next `limit` calls of one key, in the order sent, for its owner.

    Fenced: ([], []) unless `owner` holds the key's live lease at `epoch`. A
    call taken before (by this owner or an earlier one) is taken again, its
    attempts counted; one out of attempts is given up as `TakeCalls` does.
    """

    agent: str
    key: str
    owner: str
    epoch: int
    limit: int


@_op
class AnswerOwned(Write[bool]):
    """Answer calls of one key and, if `set_state`, set its owner state, in one transaction.

    Fenced: False, and nothing written, unless `owner` holds the key's live
    lease at `epoch`. Each answer is written where its call is unanswered and
    `attempt` is its latest handling.
    """

    agent: str
    key: str
    owner: str
    epoch: int
    #: (call_id, attempt, ok, body) of each answer.
    answers: tuple[tuple[str, int, bool, JsonValue], ...]
    set_state: bool = False
    state: JsonValue = None


@_op
class AnswerAndTake(
    Write[tuple[bool, list[CallRequest], list[CallRequest], tuple[int, datetime | None]]]
):
    """`answer`, then, in the same transaction, the key's next batch if it is due.

    The next batch is due when `max_items` calls wait or the oldest has waited
    `max_delay` seconds; it is taken as `TakeKeyCalls` takes. Returns (owned,
    taken, given up, backlog): the backlog is the key's unanswered calls as this
    transaction read them before taking any (how many, and when the oldest was
    sent), so that an owner that took nothing knows when its next batch is due
    without reading again. Nothing is taken for a stale owner, and its backlog
    is (0, None).
    """

    answer: AnswerOwned
    max_items: int
    max_delay: float


@_op
class GetAnswers(Read[dict[str, CallAnswer]]):
    """The answers of those of `call_ids` that are answered."""

    call_ids: tuple[str, ...]


@_op
class PurgeCalls(Write[int]):
    """Delete up to `limit` calls whose `expires_at` has passed; how many."""

    limit: int


# -- rate ----------------------------------------------------------------------
@_op
class TakeTokens(Write[tuple[int, float | None, float]]):
    """(granted, rate, wait): up to `want` tokens of the resource's shared bucket.

    rate None: the resource has no rate (everything is granted, nothing stored);
    wait: seconds until the next token when fewer than `want` were granted.
    """

    resource: str
    want: int


# -- operator alerts -------------------------------------------------------------
# An alert row is written by the write that moves its task into `error`
# (ApplySupervision, ApplyCrash, FailTask), in its transaction.
@_op
class ListAlerts(Read[list[StoredAlert]]):
    """The stored alerts (only the unacknowledged ones if `open_only`, only those of
    `task_id` if given), newest first."""

    open_only: bool = False
    limit: int = 100
    task_id: str | None = None


@_op
class AcknowledgeAlert(Write[StoredAlert]):
    """Acknowledge an alert by `by`; one acknowledged already keeps its first acknowledgement.

    Returns the alert as stored; `UnknownAlertError` (nothing written) for an
    unknown id.
    """

    alert_id: int
    by: str


# -- operators (named tokens) and the overview ------------------------------------
# Only a token's SHA-256 hash is stored; the facade makes the token and hashes it.
@_op
class AddOperator(Write[Operator]):
    """Store a new operator; `OperatorExistsError` (nothing written) if the name is taken."""

    name: str
    token_hash: str


@_op
class ListOperators(Read[list[Operator]]):
    """Every operator, by name."""


@_op
class RemoveOperator(Write[None]):
    """Delete an operator (its token stops working); `UnknownOperatorError` for an unknown name."""

    name: str


@_op
class FindOperator(Read[tuple[Operator, str] | None]):
    """The operator whose token has this hash, with the hash as stored; None if none has."""

    token_hash: str


@_op
class TouchOperator(Write[None]):
    """Set an operator's `last_used_at` to now (nothing for an unknown name)."""

    name: str


@_op
class GetLease(Read[Lease | None]):
    """The named lease as stored (expired or not), or None if it was never taken."""

    name: str


@_op
class EndedCounts(Read[dict[tuple[int, ProcessState], int]]):
    """How many tasks ended (`processed`, `error`, `compensated`, `cancelled`) per slice.

    Counts tasks whose `updated_at` (when they ended) is at or after `since`,
    keyed by (slice index, state): slice i holds [since + i*bucket,
    since + (i+1)*bucket), `bucket` in seconds.
    """

    since: datetime
    bucket: float
