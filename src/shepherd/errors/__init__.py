"""Every error shepherd raises, in one tree.

    ShepherdError
    ├── ConfigError                 invalid setting; names the field
    ├── StoreUnavailableError       the store cannot be reached now (roles retry)
    │   ├── StoreFullError          the store's disk is full
    │   └── CommitUnknownError      the store was lost while committing: outcome unknown
    ├── StoreDamagedError           the store's file or schema is damaged (roles stop)
    ├── UnusableStoreError          a store that is opened without migrating is not usable as it is
    │   ├── StoreNotFoundError      no store there yet (a missing file, an empty database)
    │   ├── NotAStoreError          a file or database that holds something else
    │   ├── StoreTooNewError        its schema was migrated by newer code
    │   └── StoreTooOldError        its schema needs migrations this code would apply
    ├── RoleStoppedError            a role's loop ended on its own: the process stops
    ├── UnknownWorkflowError        no workflow of that name is registered
    ├── UnknownAgentError           no agent of that name is registered
    ├── UnknownTaskError            no task with that id
    ├── UnknownAlertError           no stored operator alert with that id
    ├── UnknownOperatorError        no operator (named token) of that name
    ├── OperatorExistsError         `tokens add` of a name already taken
    ├── PayloadError                malformed JSON, too large, too deeply nested; a text
    │   │                           over its limit (`shepherd.core.limits`)
    │   └── OwnerKeyError           an exclusive agent's call without a usable owning key
    ├── InvalidStateError           the operation does not apply to the task's state
    ├── NonDeterminismError         replay met a different agent at a recorded seq
    ├── StaleEpochError             an owner's write was fenced off (lock_epoch moved on)
    ├── TaskFailedError             `app.result` of a task that ended without a result
    ├── SignalTimeoutError          `ctx.wait_for` reached its timeout with no signal
    ├── StepSupersededError         a heartbeat found the step is no longer this execution's
    ├── ResourceError               resource governance: resources, partitions, entities
    │   ├── InvalidResourceError    a bad name, kind, info, capacity or rate (also a ConfigError)
    │   ├── UnknownResourceError    no resource of that name
    │   ├── ResourceExistsError     `resources add` of a name already taken
    │   ├── ResourceInUseError      a resource that partitions still live on
    │   ├── UnknownPartitionError   no partition of that name
    │   ├── PartitionMovingError    another move of the partition is under way
    │   ├── UnresolvedEntityError   an entity assigned to no partition (and no default)
    │   └── ResourceConflictError   an agent's `resource=` and its call's entity disagree
    └── AgentError                  raised by agent handlers
        ├── BreakerOpenError        a call refused at once: its service's breaker is open
        ├── TransientError          worth retrying (within complete_by)
        ├── PermanentError          not worth retrying; the step fails
        │   └── OutcomeUnknownError a side effect may have happened; the operator decides
        └── StepBugError            `ctx.call`: the handler raised an unexpected exception

Each class's docstring is its default message; structured fields are attributes.
"""

from __future__ import annotations

from shepherd.errors._base import (
    AgentError,
    BreakerOpenError,
    CallFailedError,
    CommitUnknownError,
    ConfigError,
    IncompleteAppError,
    InvalidStateError,
    NonDeterminismError,
    NotAStoreError,
    OperatorExistsError,
    OutcomeUnknownError,
    OwnerKeyError,
    PayloadError,
    PermanentError,
    RoleStoppedError,
    ShepherdError,
    SignalTimeoutError,
    StaleEpochError,
    StepBugError,
    StepSupersededError,
    StoreDamagedError,
    StoreFullError,
    StoreNotFoundError,
    StoreTooNewError,
    StoreTooOldError,
    StoreUnavailableError,
    TaskFailedError,
    TooLongError,
    TransientError,
    UnknownAgentError,
    UnknownAlertError,
    UnknownOperatorError,
    UnknownTaskError,
    UnknownWorkflowError,
    UnusableStoreError,
)
from shepherd.errors.resources import (
    InvalidResourceError,
    PartitionMovingError,
    ResourceConflictError,
    ResourceError,
    ResourceExistsError,
    ResourceInUseError,
    ResourceNameTooLongError,
    UnknownPartitionError,
    UnknownResourceError,
    UnresolvedEntityError,
)

__all__ = [
    "AgentError",
    "BreakerOpenError",
    "CallFailedError",
    "CommitUnknownError",
    "ConfigError",
    "IncompleteAppError",
    "InvalidResourceError",
    "InvalidStateError",
    "NonDeterminismError",
    "NotAStoreError",
    "OperatorExistsError",
    "OutcomeUnknownError",
    "OwnerKeyError",
    "PartitionMovingError",
    "PayloadError",
    "PermanentError",
    "ResourceConflictError",
    "ResourceError",
    "ResourceExistsError",
    "ResourceInUseError",
    "ResourceNameTooLongError",
    "RoleStoppedError",
    "ShepherdError",
    "SignalTimeoutError",
    "StaleEpochError",
    "StepBugError",
    "StepSupersededError",
    "StoreDamagedError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreTooNewError",
    "StoreTooOldError",
    "StoreUnavailableError",
    "TaskFailedError",
    "TooLongError",
    "TransientError",
    "UnknownAgentError",
    "UnknownAlertError",
    "UnknownOperatorError",
    "UnknownPartitionError",
    "UnknownResourceError",
    "UnknownTaskError",
    "UnknownWorkflowError",
    "UnresolvedEntityError",
    "UnusableStoreError",
]
