"""The App's reads of its tasks and the operator's actions, as methods of the App.

Each delegates to `app.operations` (`shepherd.operations.Operations`), which
the CLI and the dashboard use too: one implementation, whichever door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Unpack

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.moves import PartitionMove
    from shepherd.core.records import Event, JsonValue, Task
    from shepherd.operations import Operations, TaskFilters

__all__ = ["OperatorMethods"]


class OperatorMethods:
    """A mixin of the App: what it reads of its tasks and does to them as an operator."""

    operations: Operations

    async def get_task(self, task_id: str) -> Task:
        """The task with its steps (UnknownTaskError: none, or purged, as it says)."""
        return await self.operations.get_task(task_id)

    async def list_tasks(self, *, limit: int = 100, **filters: Unpack[TaskFilters]) -> list[Task]:
        """Tasks, newest first, without steps, matching every filter (`Operations.list_tasks`)."""
        return await self.operations.list_tasks(limit=limit, **filters)

    async def history(self, task_id: str) -> list[Event]:
        """A task's events, oldest first."""
        return await self.operations.history(task_id)

    async def retry(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        """Put an `error` task back to work from its failed step, or step `seq` (`by`: who)."""
        return await self.operations.retry(task_id, seq=seq, payload=payload, by=by)

    async def move_partition(
        self,
        partition: str,
        resource: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - when it passes the move is made, nothing is cancelled
        now: bool = False,
    ) -> PartitionMove:
        """Put `partition` on `resource` after draining it (`shepherd partitions move`).

        Steps that would start for its entities meanwhile wait (neither failed
        nor charged); once the steps in flight on its resource have ended, it
        moves. `timeout`: seconds to wait at most, then it moves anyway; `now`:
        move at once. Either way the report lists the steps still in flight.
        """
        return await self.operations.drain_and_move_partition(
            partition, resource, timeout=timeout, now=now
        )

    async def cancel(self, task_id: str, *, by: str | None = None) -> Task:
        """Undo a task that has not ended: compensated, then `cancelled` (`by`: who)."""
        return await self.operations.cancel(task_id, by=by)

    async def alerts(
        self,
        *,
        open_only: bool = False,
        limit: int = 100,
        task_id: str | None = None,
        state: str | None = None,
    ) -> list[StoredAlert]:
        """The stored operator alerts, newest first (`Operations.alerts`; `state`: open,
        acknowledged, resolved, or every one when None)."""
        return await self.operations.alerts(
            open_only=open_only, limit=limit, task_id=task_id, state=state
        )

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """Acknowledge a stored alert by `by`; the alert as stored (first acknowledgement)."""
        return await self.operations.acknowledge_alert(alert_id, by=by)
