"""The store's operations: each declared once, as a typed value, in its concept's module.

An operation names what it needs and, through its type parameter, what it
returns: `ClaimTasks(locked_by=..., limit=...)` is an `Op[list[Task]]`. Each
concept's module (tasks, claims, steps, events, queues, done keys, breakers,
leases, supervision, workers, crashes, retention, resources, slots, rates,
owners, calls, alerts, operators) declares its operations, each with its
guarantee in its docstring, and the class of the store's methods that run
them (`claim_tasks = method(ClaimTasks)`); `shepherd.store.contract.Store` is
every such class together. Each backend keeps one table from operation type
to handler (`shepherd.store.dispatch`). Every operation is re-exported here:
`from shepherd.store.ops import ClaimTasks`. How to add one: docs/design.md,
"How to add a store operation".
"""

from __future__ import annotations

from shepherd.store.ops.alerts import (
    AcknowledgeAlert as AcknowledgeAlert,
)
from shepherd.store.ops.alerts import (
    ListAlerts as ListAlerts,
)
from shepherd.store.ops.base import (
    Op as Op,
)
from shepherd.store.ops.base import (
    Read as Read,
)
from shepherd.store.ops.base import (
    Write as Write,
)
from shepherd.store.ops.breakers import (
    BreakerAllow as BreakerAllow,
)
from shepherd.store.ops.breakers import (
    BreakerEvents as BreakerEvents,
)
from shepherd.store.ops.breakers import (
    BreakerReport as BreakerReport,
)
from shepherd.store.ops.breakers import (
    GetBreaker as GetBreaker,
)
from shepherd.store.ops.breakers import (
    ListBreakers as ListBreakers,
)
from shepherd.store.ops.calls import (
    AnswerCall as AnswerCall,
)
from shepherd.store.ops.calls import (
    GetAnswers as GetAnswers,
)
from shepherd.store.ops.calls import (
    SendCall as SendCall,
)
from shepherd.store.ops.calls import (
    TakeCalls as TakeCalls,
)
from shepherd.store.ops.claims import (
    ClaimTasks as ClaimTasks,
)
from shepherd.store.ops.claims import (
    FailTask as FailTask,
)
from shepherd.store.ops.claims import (
    FinishTask as FinishTask,
)
from shepherd.store.ops.claims import (
    NextDue as NextDue,
)
from shepherd.store.ops.claims import (
    ReleaseTasks as ReleaseTasks,
)
from shepherd.store.ops.claims import (
    StartCompensation as StartCompensation,
)
from shepherd.store.ops.crashes import (
    ApplyCrash as ApplyCrash,
)
from shepherd.store.ops.crashes import (
    CrashVictims as CrashVictims,
)
from shepherd.store.ops.crashes import (
    HeldRequest as HeldRequest,
)
from shepherd.store.ops.crashes import (
    HeldRequests as HeldRequests,
)
from shepherd.store.ops.done_keys import (
    AbandonOnce as AbandonOnce,
)
from shepherd.store.ops.done_keys import (
    BeginOnce as BeginOnce,
)
from shepherd.store.ops.done_keys import (
    FinishOnce as FinishOnce,
)
from shepherd.store.ops.events import (
    Note as Note,
)
from shepherd.store.ops.events import (
    ReadEvents as ReadEvents,
)
from shepherd.store.ops.events import (
    TaskEvents as TaskEvents,
)
from shepherd.store.ops.leases import (
    AcquireLease as AcquireLease,
)
from shepherd.store.ops.leases import (
    GetLease as GetLease,
)
from shepherd.store.ops.leases import (
    ReleaseLease as ReleaseLease,
)
from shepherd.store.ops.operators import (
    AddOperator as AddOperator,
)
from shepherd.store.ops.operators import (
    FindOperator as FindOperator,
)
from shepherd.store.ops.operators import (
    ListOperators as ListOperators,
)
from shepherd.store.ops.operators import (
    RemoveOperator as RemoveOperator,
)
from shepherd.store.ops.operators import (
    TouchOperator as TouchOperator,
)
from shepherd.store.ops.owners import (
    AnswerAndTake as AnswerAndTake,
)
from shepherd.store.ops.owners import (
    AnswerOwned as AnswerOwned,
)
from shepherd.store.ops.owners import (
    KeyBacklogs as KeyBacklogs,
)
from shepherd.store.ops.owners import (
    ListKeyLeases as ListKeyLeases,
)
from shepherd.store.ops.owners import (
    ReleaseKeys as ReleaseKeys,
)
from shepherd.store.ops.owners import (
    RenewKeys as RenewKeys,
)
from shepherd.store.ops.owners import (
    TakeKeyCalls as TakeKeyCalls,
)
from shepherd.store.ops.owners import (
    TakeKeys as TakeKeys,
)
from shepherd.store.ops.owners import (
    WaitingKeys as WaitingKeys,
)
from shepherd.store.ops.queues import (
    QueueDepths as QueueDepths,
)
from shepherd.store.ops.queues import (
    ReplyAndAck as ReplyAndAck,
)
from shepherd.store.ops.queues import (
    TakeRequests as TakeRequests,
)
from shepherd.store.ops.rates import (
    TakeTokens as TakeTokens,
)
from shepherd.store.ops.resources import (
    AddResource as AddResource,
)
from shepherd.store.ops.resources import (
    AssignEntity as AssignEntity,
)
from shepherd.store.ops.resources import (
    DeclareResource as DeclareResource,
)
from shepherd.store.ops.resources import (
    ListPartitions as ListPartitions,
)
from shepherd.store.ops.resources import (
    ListResources as ListResources,
)
from shepherd.store.ops.resources import (
    MovePartition as MovePartition,
)
from shepherd.store.ops.resources import (
    RemoveResource as RemoveResource,
)
from shepherd.store.ops.resources import (
    Resolve as Resolve,
)
from shepherd.store.ops.resources import (
    ResolverVersion as ResolverVersion,
)
from shepherd.store.ops.resources import (
    SetResource as SetResource,
)
from shepherd.store.ops.resources import (
    UnassignEntity as UnassignEntity,
)
from shepherd.store.ops.retention import (
    GetTombstone as GetTombstone,
)
from shepherd.store.ops.retention import (
    PurgeCalls as PurgeCalls,
)
from shepherd.store.ops.retention import (
    PurgeTasks as PurgeTasks,
)
from shepherd.store.ops.retention import (
    PurgeTombstones as PurgeTombstones,
)
from shepherd.store.ops.slots import (
    AcquireSlots as AcquireSlots,
)
from shepherd.store.ops.slots import (
    ReleaseSlots as ReleaseSlots,
)
from shepherd.store.ops.slots import (
    RenewSlots as RenewSlots,
)
from shepherd.store.ops.steps import (
    ExtendStep as ExtendStep,
)
from shepherd.store.ops.steps import (
    RecordReplies as RecordReplies,
)
from shepherd.store.ops.steps import (
    StartStep as StartStep,
)
from shepherd.store.ops.steps import (
    StepStart as StepStart,
)
from shepherd.store.ops.supervision import (
    ApplySupervision as ApplySupervision,
)
from shepherd.store.ops.supervision import (
    ExpiredClaims as ExpiredClaims,
)
from shepherd.store.ops.tasks import (
    CancelTask as CancelTask,
)
from shepherd.store.ops.tasks import (
    CountTasks as CountTasks,
)
from shepherd.store.ops.tasks import (
    CountTasksIn as CountTasksIn,
)
from shepherd.store.ops.tasks import (
    EndedCounts as EndedCounts,
)
from shepherd.store.ops.tasks import (
    GetTask as GetTask,
)
from shepherd.store.ops.tasks import (
    ListTasks as ListTasks,
)
from shepherd.store.ops.tasks import (
    NewTask as NewTask,
)
from shepherd.store.ops.tasks import (
    RetryTask as RetryTask,
)
from shepherd.store.ops.tasks import (
    SubmitTask as SubmitTask,
)
from shepherd.store.ops.tasks import (
    SubmitTasks as SubmitTasks,
)
from shepherd.store.ops.tasks import (
    Submitted as Submitted,
)
from shepherd.store.ops.tasks import (
    TaskFilters as TaskFilters,
)
from shepherd.store.ops.workers import (
    BeatWorker as BeatWorker,
)
from shepherd.store.ops.workers import (
    DeadWorkers as DeadWorkers,
)
from shepherd.store.ops.workers import (
    ListWorkers as ListWorkers,
)
from shepherd.store.ops.workers import (
    MarkDied as MarkDied,
)
from shepherd.store.ops.workers import (
    ReapWorker as ReapWorker,
)
from shepherd.store.ops.workers import (
    RegisterWorker as RegisterWorker,
)
from shepherd.store.ops.workers import (
    StopWorker as StopWorker,
)
from shepherd.store.ops.workers import (
    UnreapedWorkers as UnreapedWorkers,
)

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
    "HeldRequest",
    "HeldRequests",
    "KeyBacklogs",
    "ListAlerts",
    "ListBreakers",
    "ListKeyLeases",
    "ListOperators",
    "ListPartitions",
    "ListResources",
    "ListTasks",
    "ListWorkers",
    "MarkDied",
    "MovePartition",
    "NewTask",
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
    "SetResource",
    "StartCompensation",
    "StartStep",
    "StepStart",
    "StopWorker",
    "SubmitTask",
    "SubmitTasks",
    "Submitted",
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
