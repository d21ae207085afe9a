"""The boundaries the house style promises: a pure core and a frozen public API."""

from __future__ import annotations

import subprocess
import sys

import shepherd


def test_core_imports_no_io_modules() -> None:
    code = (
        "import sys, pkgutil, importlib, shepherd.core\n"
        "for m in pkgutil.iter_modules(shepherd.core.__path__):\n"
        "    importlib.import_module('shepherd.core.' + m.name)\n"
        "print(sorted(x for x in ('asyncio', 'sqlite3', 'psycopg') if x in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_api_is_frozen() -> None:
    assert shepherd.__all__ == [
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
    for name in shepherd.__all__:
        assert getattr(shepherd, name) is not None
