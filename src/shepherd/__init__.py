"""shepherd: run multi-step tasks against unreliable remote services, and bring every task to an end."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shepherd.agents.request import AgentRequest as AgentRequest
    from shepherd.alerts import Alert as Alert
    from shepherd.app import App as App
    from shepherd.core.breaker import BreakerPolicy as BreakerPolicy
    from shepherd.core.overview import Operator as Operator
    from shepherd.core.overview import ThroughputBucket as ThroughputBucket
    from shepherd.core.resources import Partition as Partition
    from shepherd.core.resources import Resolution as Resolution
    from shepherd.core.resources import Resource as Resource
    from shepherd.core.retry import RetryPolicy as RetryPolicy
    from shepherd.core.states import ProcessState as ProcessState
    from shepherd.core.states import StepState as StepState
    from shepherd.core.supervision import BackoffPolicy as BackoffPolicy
    from shepherd.errors import CallFailedError as CallFailedError
    from shepherd.errors import CommitUnknownError as CommitUnknownError
    from shepherd.errors import ConfigError as ConfigError
    from shepherd.errors import IncompleteAppError as IncompleteAppError
    from shepherd.errors import InvalidResourceError as InvalidResourceError
    from shepherd.errors import NonDeterminismError as NonDeterminismError
    from shepherd.errors import NotAStoreError as NotAStoreError
    from shepherd.errors import OutcomeUnknownError as OutcomeUnknownError
    from shepherd.errors import OwnerKeyError as OwnerKeyError
    from shepherd.errors import PartitionMovingError as PartitionMovingError
    from shepherd.errors import PayloadError as PayloadError
    from shepherd.errors import PermanentError as PermanentError
    from shepherd.errors import ResourceError as ResourceError
    from shepherd.errors import ResourceExistsError as ResourceExistsError
    from shepherd.errors import ResourceInUseError as ResourceInUseError
    from shepherd.errors import ResourceNameTooLongError as ResourceNameTooLongError
    from shepherd.errors import ShepherdError as ShepherdError
    from shepherd.errors import SignalTimeoutError as SignalTimeoutError
    from shepherd.errors import StaleEpochError as StaleEpochError
    from shepherd.errors import StepBugError as StepBugError
    from shepherd.errors import StepSupersededError as StepSupersededError
    from shepherd.errors import StoreDamagedError as StoreDamagedError
    from shepherd.errors import StoreFullError as StoreFullError
    from shepherd.errors import StoreNotFoundError as StoreNotFoundError
    from shepherd.errors import StoreTooNewError as StoreTooNewError
    from shepherd.errors import StoreTooOldError as StoreTooOldError
    from shepherd.errors import StoreUnavailableError as StoreUnavailableError
    from shepherd.errors import TaskFailedError as TaskFailedError
    from shepherd.errors import TooLongError as TooLongError
    from shepherd.errors import TransientError as TransientError
    from shepherd.errors import UnknownAgentError as UnknownAgentError
    from shepherd.errors import UnknownPartitionError as UnknownPartitionError
    from shepherd.errors import UnknownResourceError as UnknownResourceError
    from shepherd.errors import UnknownTaskError as UnknownTaskError
    from shepherd.errors import UnknownWorkflowError as UnknownWorkflowError
    from shepherd.errors import UnresolvedEntityError as UnresolvedEntityError
    from shepherd.errors import UnusableStoreError as UnusableStoreError
    from shepherd.governance.batch import Batch as Batch
    from shepherd.governance.resolver import Resolver as Resolver
    from shepherd.governance.resolver import StaticResolver as StaticResolver
    from shepherd.governance.resolver import StoreResolver as StoreResolver
    from shepherd.scheduler.context import WorkflowContext as WorkflowContext
    from shepherd.store.cursor import TaskCursor as TaskCursor
    from shepherd.submission import Submission as Submission

# Imported on first use, so that `import shepherd.core` stays free of asyncio and drivers.
_LAZY: dict[str, str] = {
    "AgentRequest": "shepherd.agents.request",
    "Alert": "shepherd.alerts",
    "App": "shepherd.app",
    "WorkflowContext": "shepherd.scheduler.context",
    "Submission": "shepherd.submission",
    "Batch": "shepherd.governance.batch",
    "RetryPolicy": "shepherd.core.retry",
    "BreakerPolicy": "shepherd.core.breaker",
    "Operator": "shepherd.core.overview",
    "ThroughputBucket": "shepherd.core.overview",
    "TaskCursor": "shepherd.store.cursor",
    "ProcessState": "shepherd.core.states",
    "StepState": "shepherd.core.states",
    "BackoffPolicy": "shepherd.core.supervision",
    "Partition": "shepherd.core.resources",
    "Resolution": "shepherd.core.resources",
    "Resource": "shepherd.core.resources",
    "Resolver": "shepherd.governance.resolver",
    "StaticResolver": "shepherd.governance.resolver",
    "StoreResolver": "shepherd.governance.resolver",
    "CallFailedError": "shepherd.errors",
    "ConfigError": "shepherd.errors",
    "IncompleteAppError": "shepherd.errors",
    "NonDeterminismError": "shepherd.errors",
    "OutcomeUnknownError": "shepherd.errors",
    "OwnerKeyError": "shepherd.errors",
    "PayloadError": "shepherd.errors",
    "TooLongError": "shepherd.errors",
    "ResourceNameTooLongError": "shepherd.errors",
    "PermanentError": "shepherd.errors",
    "ShepherdError": "shepherd.errors",
    "StaleEpochError": "shepherd.errors",
    "SignalTimeoutError": "shepherd.errors",
    "StepBugError": "shepherd.errors",
    "StepSupersededError": "shepherd.errors",
    "StoreUnavailableError": "shepherd.errors",
    "StoreFullError": "shepherd.errors",
    "StoreDamagedError": "shepherd.errors",
    "UnusableStoreError": "shepherd.errors",
    "StoreNotFoundError": "shepherd.errors",
    "NotAStoreError": "shepherd.errors",
    "StoreTooNewError": "shepherd.errors",
    "StoreTooOldError": "shepherd.errors",
    "CommitUnknownError": "shepherd.errors",
    "TaskFailedError": "shepherd.errors",
    "TransientError": "shepherd.errors",
    "UnknownAgentError": "shepherd.errors",
    "UnknownTaskError": "shepherd.errors",
    "UnknownWorkflowError": "shepherd.errors",
    "ResourceError": "shepherd.errors",
    "InvalidResourceError": "shepherd.errors",
    "UnknownResourceError": "shepherd.errors",
    "ResourceExistsError": "shepherd.errors",
    "ResourceInUseError": "shepherd.errors",
    "PartitionMovingError": "shepherd.errors",
    "UnknownPartitionError": "shepherd.errors",
    "UnresolvedEntityError": "shepherd.errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shepherd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentRequest",
    "Alert",
    "App",
    "BackoffPolicy",
    "Batch",
    "BreakerPolicy",
    "CallFailedError",
    "CommitUnknownError",
    "ConfigError",
    "IncompleteAppError",
    "InvalidResourceError",
    "NonDeterminismError",
    "NotAStoreError",
    "Operator",
    "OutcomeUnknownError",
    "OwnerKeyError",
    "Partition",
    "PartitionMovingError",
    "PayloadError",
    "PermanentError",
    "ProcessState",
    "Resolution",
    "Resolver",
    "Resource",
    "ResourceError",
    "ResourceExistsError",
    "ResourceInUseError",
    "ResourceNameTooLongError",
    "RetryPolicy",
    "ShepherdError",
    "SignalTimeoutError",
    "StaleEpochError",
    "StaticResolver",
    "StepBugError",
    "StepState",
    "StepSupersededError",
    "StoreDamagedError",
    "StoreFullError",
    "StoreNotFoundError",
    "StoreResolver",
    "StoreTooNewError",
    "StoreTooOldError",
    "StoreUnavailableError",
    "Submission",
    "TaskCursor",
    "TaskFailedError",
    "ThroughputBucket",
    "TooLongError",
    "TransientError",
    "UnknownAgentError",
    "UnknownPartitionError",
    "UnknownResourceError",
    "UnknownTaskError",
    "UnknownWorkflowError",
    "UnresolvedEntityError",
    "UnusableStoreError",
    "WorkflowContext",
]
