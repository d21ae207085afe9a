"""How a workflow's run stops without ending its task: its claim is gone, or its store is.

Both are BaseExceptions, so that a workflow's `except Exception` cannot
swallow them: the scheduler catches them (`scheduler.scheduler`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shepherd.errors import StoreUnavailableError

__all__ = ["Abandoned", "StoreLost"]


class Abandoned(BaseException):
    """The scheduler lost its claim (fenced off, or past complete_by): stop silently.

    A BaseException so that a workflow's `except Exception` cannot swallow it.
    """


class StoreLost(BaseException):
    """The store failed under a step's write (`cause`): the scheduler waits it out.

    A BaseException so that a workflow's `except Exception` cannot swallow it
    and mistake a store outage for the step's failure.
    """

    def __init__(self, cause: StoreUnavailableError) -> None:
        super().__init__(str(cause))
        self.cause = cause
