"""shepherd: run multi-step tasks against unreliable remote services, and bring every task to an end."""

from __future__ import annotations

from shepherd.agent import AgentRequest as AgentRequest
from shepherd.alerts import Alert as Alert
from shepherd.app import App as App
from shepherd.context import WorkflowContext as WorkflowContext
from shepherd.core.retry import RetryPolicy as RetryPolicy
from shepherd.core.states import ProcessState as ProcessState
from shepherd.core.states import StepState as StepState
from shepherd.core.supervision import BackoffPolicy as BackoffPolicy
from shepherd.errors import ConfigError as ConfigError
from shepherd.errors import NonDeterminismError as NonDeterminismError
from shepherd.errors import PayloadError as PayloadError
from shepherd.errors import PermanentError as PermanentError
from shepherd.errors import ShepherdError as ShepherdError
from shepherd.errors import StaleEpochError as StaleEpochError
from shepherd.errors import StoreUnavailableError as StoreUnavailableError
from shepherd.errors import TaskFailedError as TaskFailedError
from shepherd.errors import TransientError as TransientError
from shepherd.errors import UnknownAgentError as UnknownAgentError
from shepherd.errors import UnknownTaskError as UnknownTaskError
from shepherd.errors import UnknownWorkflowError as UnknownWorkflowError

__all__ = [
    "AgentRequest",
    "Alert",
    "App",
    "BackoffPolicy",
    "ConfigError",
    "NonDeterminismError",
    "PayloadError",
    "PermanentError",
    "ProcessState",
    "RetryPolicy",
    "ShepherdError",
    "StaleEpochError",
    "StepState",
    "StoreUnavailableError",
    "TaskFailedError",
    "TransientError",
    "UnknownAgentError",
    "UnknownTaskError",
    "UnknownWorkflowError",
    "WorkflowContext",
]
