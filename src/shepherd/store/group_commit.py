"""Group commit: many callers' operations, one transaction.

Callers await the future `submit(op)` returns; a single flusher, started in the next turn of the
event loop (so every coroutine ready in this turn has queued its operation by
then), takes every operation waiting at that moment and hands them to the
backend's `run_batch`, which executes them in ONE transaction and returns one
outcome per operation (a value, or an exception for that caller alone). While
a batch commits, new operations queue up for the next one, so under load the
number of commits stays small however many callers there are. Each caller's
await ends only after its own operation is durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, final

from shepherd.store.ops import Write

__all__ = ["BatchRunner", "GroupCommitter", "Pending", "fail", "settle"]

R = TypeVar("R")


@dataclass(slots=True)
class Pending:
    """One operation waiting for the next batch, and its caller's future."""

    op: Write[Any]
    future: asyncio.Future[Any] = field(repr=False)


#: Executes operations in one transaction; returns one outcome per operation.
BatchRunner = Callable[[Sequence[Write[Any]]], Awaitable[Sequence[object]]]


@final
class GroupCommitter:
    """Coalesces operations into batches run by one flusher at a time."""

    def __init__(self, runner: BatchRunner, *, max_batch: int = 4096) -> None:
        self._runner = runner
        self._max_batch = max_batch
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        # Operations of the batch being run.
        self._in_flight = 0
        self.batches = 0
        self.operations = 0

    def submit(self, op: Write[R]) -> asyncio.Future[R]:
        """Queue one operation; its outcome, once its batch has committed, as a future."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(Pending(op, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return future

    def backlog(self) -> int:
        """Operations queued or in flight."""
        return len(self._pending) + self._in_flight

    async def drain(self) -> None:
        """Wait until every operation queued so far has been run (or failed)."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher])

    async def _flush(self) -> None:
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            self._in_flight = len(batch)
            try:
                outcomes = await self._runner([p.op for p in batch])
            except BaseException as exc:  # the whole batch failed: tell every caller
                self._in_flight = 0
                fail(batch, exc)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            self._in_flight = 0
            self.batches += 1
            self.operations += len(batch)
            settle(batch, outcomes)

    def statistics(self) -> dict[str, float]:
        """Batches committed, operations carried, and their mean per batch."""
        return {
            "batches": self.batches,
            "operations": self.operations,
            "ops_per_batch": self.operations / self.batches if self.batches else 0.0,
        }


def settle(batch: list[Pending], outcomes: Sequence[object]) -> None:
    """Give each caller of a committed batch its outcome (an exception is raised to it)."""
    for pending, outcome in zip(batch, outcomes, strict=True):
        if pending.future.done():  # its caller gave up
            continue
        if isinstance(outcome, BaseException):
            pending.future.set_exception(outcome)
        else:
            pending.future.set_result(outcome)


def fail(batch: list[Pending], error: BaseException) -> None:
    """Tell every caller still waiting that its batch failed with `error`."""
    for pending in batch:
        if not pending.future.done():
            pending.future.set_exception(error)
