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

__all__ = ["STOP_RECHECK", "RoleLoop", "run_roles"]

log = logging.getLogger("shepherd")

#: Real seconds a cancelled role has to end before it is cancelled again. A
#: cancellation can be lost: on Python 3.11, `asyncio.wait_for` (which drivers
#: use to wait for a pooled connection) drops one that arrives as its inner
#: wait finishes, and the role goes on as if never asked to stop.
STOP_RECHECK = 1.0


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
        await _stop(jobs)


async def _stop(jobs: dict[asyncio.Task[None], str]) -> None:
    """Cancel every job and wait until each has ended, cancelling again one that lost its cancel.

    Raises:
        CancelledError: This task was itself cancelled meanwhile (once all have ended).
    """
    pending = {job for job in jobs if not job.done()}
    cancelled = False
    rounds = 0
    while pending:
        if rounds:
            log.warning(
                "%s still running %g s after being cancelled; cancelling again",
                ", ".join(sorted(jobs[job] for job in pending)),
                STOP_RECHECK * rounds,
            )
        for job in pending:
            job.cancel()
        rounds += 1
        try:
            _, pending = await asyncio.wait(pending, timeout=STOP_RECHECK)
        except asyncio.CancelledError:  # stop them all first, then end as asked
            cancelled = True
            pending = {job for job in pending if not job.done()}
    for job in jobs:  # retrieved, so that asyncio does not log them as lost
        if not job.cancelled():
            job.exception()
    if cancelled:
        raise asyncio.CancelledError


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
