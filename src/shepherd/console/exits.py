"""The exit codes of `shepherd` commands, defined once, and the failures only the CLI raises.

0    success
1    an unexpected failure (a bug: a traceback is printed), or stdout closed early
2    usage or bad input: a bad option or argument, an invalid setting, bad JSON,
     an unknown workflow, an ambiguous task, an operation the task's state forbids
3    unknown task
4    the task ended badly (`submit --wait`: compensated, cancelled or error)
5    timeout (`submit --wait` elapsed before the task ended)
6    the store is unavailable or damaged, or not usable as it is by a command that
     never creates or migrates one (missing, not a shepherd store, another version)
130  interrupted (Ctrl-C)
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

import click

from shepherd.errors import (
    ShepherdError,
    StoreDamagedError,
    StoreUnavailableError,
    TaskFailedError,
    UnknownTaskError,
    UnusableStoreError,
)

__all__ = ["AmbiguousTaskError", "ExitCode", "WaitTimeoutError", "exit_code"]


class ExitCode(IntEnum):
    """What a `shepherd` command's exit status means (see the module's table)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    UNKNOWN_TASK = 3
    TASK_FAILED = 4
    TIMEOUT = 5
    STORE_UNAVAILABLE = 6
    INTERRUPTED = 130


class AmbiguousTaskError(ShepherdError):
    """TASK names more than one task (an id prefix, or a key used by several workflows).

    `candidates` are the ids of some of the tasks it names.
    """

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        self.candidates = tuple(candidates)
        super().__init__(message)


class WaitTimeoutError(ShepherdError):
    """The task did not end within the time `--wait` allowed.

    `alive` is how many worker processes the worker registry holds alive (None
    when the registry could not be read).
    """

    def __init__(self, message: str, *, task_id: str, alive: int | None) -> None:
        self.task_id = task_id
        self.alive = alive
        super().__init__(message)


def exit_code(error: BaseException) -> ExitCode:
    """The exit code for a failure that ended a command."""
    if isinstance(error, StoreUnavailableError | StoreDamagedError | UnusableStoreError):
        return ExitCode.STORE_UNAVAILABLE
    if isinstance(error, UnknownTaskError):
        return ExitCode.UNKNOWN_TASK
    if isinstance(error, TaskFailedError):
        return ExitCode.TASK_FAILED
    if isinstance(error, WaitTimeoutError):
        return ExitCode.TIMEOUT
    if isinstance(error, ShepherdError | click.ClickException):
        return ExitCode.USAGE
    if isinstance(error, KeyboardInterrupt | click.Abort):
        return ExitCode.INTERRUPTED
    return ExitCode.FAILURE
