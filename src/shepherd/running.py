"""The role loops of one process, run together until one of them ends.

A role runs until cancelled: one that ended on its own takes the process down,
with the reason, rather than leave a worker alive that no longer works.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from shepherd.errors import RoleStoppedError, ShepherdError

__all__ = ["RoleLoop", "run_roles"]

log = logging.getLogger("shepherd")


class RoleLoop(Protocol):
    """A role (scheduler, agent worker, supervisor) or the worker registry loop."""

    async def run(self) -> None:
        """Work until cancelled."""
        ...


async def run_roles(loops: Sequence[RoleLoop], *, ready: Callable[[], None] | None = None) -> None:
    """Run every loop until one ends; then cancel the others and raise why it ended.

    Args:
        loops: The role loops of this process.
        ready: Called once every loop has been started.

    Raises:
        ShepherdError: The error a loop ended with (a damaged store, say), or a
            `RoleStoppedError` saying how it ended (returned, cancelled, failed).
    """
    jobs = {
        asyncio.create_task(w.run(), name=f"shepherd-{type(w).__name__}"): type(w).__name__
        for w in loops
    }
    if ready is not None:
        ready()
    try:
        done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_COMPLETED)
        job = done.pop()
        raise _stopped(jobs[job], job)
    finally:
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)


def _stopped(role: str, job: asyncio.Task[None]) -> BaseException:
    """The error that ends the process after role `role` ended on its own."""
    if job.cancelled():
        error: BaseException = RoleStoppedError(f"the {role} role was cancelled")
    elif (exc := job.exception()) is None:
        error = RoleStoppedError(f"the {role} role returned")
    elif isinstance(exc, ShepherdError):
        error = exc
    else:
        error = RoleStoppedError(f"the {role} role failed: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
    # A ShepherdError names its cause (a damaged store, say): no traceback for it.
    cause = None if job.cancelled() or isinstance(error, ShepherdError) else job.exception()
    if isinstance(error, RoleStoppedError):
        cause = error.__cause__
    log.critical(
        "%s stopped: %s; stopping this process so that it can be restarted",
        role,
        error,
        exc_info=cause,
    )
    return error
