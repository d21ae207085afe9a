"""Signals from the outside: `app.signal`, `shepherd signal`, the dashboard's form.

`app.operations.signals` is this. A signal goes to one task, named by its id
or by its key together with its workflow (keys are unique per workflow); it
is stored in the task's inbox and history in one transaction, and consumed by
the first `ctx.wait_for` of its name, before or after it is sent
(`core.signalling`). Every argument is checked before the store is touched;
the store refuses an unknown or ended task and a payload it cannot keep, and
then nothing is stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, final

from shepherd.errors import PayloadError
from shepherd.payloads import check_text
from shepherd.scheduler.signalling import checked_name

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.core.signalling import Sent, Signal
    from shepherd.store.contract import Store

__all__ = ["SignalOperations"]


@final
class SignalOperations:
    """Send signals to tasks and list a task's, over an App's store.

    Args:
        store: The App's store (opened by `open_`).
        open_: Opens it (idempotent).
    """

    def __init__(self, store: Callable[[], Store], open_: Callable[[], Awaitable[object]]) -> None:
        self._store = store
        self._open = open_

    async def send(
        self,
        task: str,
        name: str,
        payload: JsonValue = None,
        *,
        workflow: str | None = None,
        idempotency_key: str | None = None,
        by: str | None = None,
    ) -> Sent:
        """Send signal `name` with `payload` to `task` (an id, or a key with `workflow=`).

        The same `idempotency_key` sent twice to one task is one signal: the
        second call stores nothing and returns the first's id (`duplicate`).

        Raises:
            UnknownTaskError: No such task (the message names it).
            InvalidStateError: The task ended `processed`, `compensated` or `cancelled`,
                or is being undone: it waits for nothing (one in `error` takes signals,
                for its waits after an operator's retry).
            PayloadError: `payload` is not JSON or over the payload limit; `name` is
                empty or over 200 bytes; `task`, `workflow` or `idempotency_key` is
                not a str a store can keep.
        """
        checked_name(name)
        check_text("task", task)
        if not isinstance(task, str) or not task:
            raise PayloadError(f"task must be a task id (or a key), not {task!r}")
        check_text("workflow", workflow)
        check_text("idempotency_key", idempotency_key)
        check_text("by", by)
        await self._open()
        if workflow is None:
            return await self._store().send_signal(
                task, name, payload, idempotency_key=idempotency_key, by=by
            )
        return await self._store().send_signal(
            None,
            name,
            payload,
            workflow=workflow,
            key=task,
            idempotency_key=idempotency_key,
            by=by,
        )

    async def of(self, task_id: str) -> list[Signal]:
        """The signals sent to `task_id`, in the order sent (none for an unknown task)."""
        await self._open()
        return await self._store().task_signals(task_id)
