"""The store contract over a backend: what every backend shares.

Every method of `shepherd.store.contract.Store` that reads or writes builds one
typed operation (`shepherd.store.ops`) and runs it through `write` (group
commit) or `read`. A backend subclasses `Facade` and supplies `queue` (a write
into its group commit), `read`, and its life cycle; it writes no method of
the contract, and a new operation needs nothing here.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from shepherd.errors import ConfigError
from shepherd.store.contract import Store
from shepherd.store.watch import StoreWatch

if TYPE_CHECKING:
    from shepherd.store.ops import Read, Write
    from shepherd.store.ops.tasks import NewTask, Submitted
    from shepherd.store.signals import Signals

__all__ = ["Facade"]

R = TypeVar("R")


class Facade(Store):
    """The store contract, each method one operation for the backend to run."""

    signals: Signals

    #: Seconds one round trip may take (the backend's `store_timeout`).
    store_timeout: float = 5.0

    @functools.cached_property
    def watch(self) -> StoreWatch:
        """Since when this process's role loops have been failing to reach the store."""
        return StoreWatch(self.now, lead=self.store_timeout)

    def write(self, op: Write[R], /) -> Awaitable[R]:
        """Run `op` in the next group-commit transaction; its outcome once durable.

        Not a coroutine function itself: it hands back the backend's awaitable
        (`queue`), so a write costs no extra frame on the hot path; a store not
        yet open is opened first.
        """
        queued = self.queue(op)
        return self._open_then_write(op) if queued is None else queued

    async def _open_then_write(self, op: Write[R]) -> R:
        await self.open()
        queued = self.queue(op)
        if queued is None:  # closed again meanwhile
            raise self.closed_error()
        return await queued

    # -- what a backend supplies ------------------------------------------
    @abstractmethod
    def queue(self, op: Write[R]) -> Awaitable[R] | None:
        """Queue `op` for the next group commit; None if the store is not open."""

    @abstractmethod
    def closed_error(self) -> Exception:
        """The error a caller of a closed store gets."""

    @abstractmethod
    async def read(self, op: Read[R], /) -> R:
        """Run `op` on a read connection."""

    @abstractmethod
    def now(self) -> datetime: ...

    # A backend that can join a caller's transaction (PostgreSQL) overrides these two.
    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        raise self._cannot_join()

    async def submit_tasks_in(
        self, tasks: Sequence[NewTask], connection: object
    ) -> list[Submitted]:
        raise self._cannot_join()

    def _cannot_join(self) -> ConfigError:
        return ConfigError(
            "connection",
            "transactional submit (connection=...) needs the PostgreSQL store; "
            f"{type(self).__name__} cannot join a caller's transaction",
        )
