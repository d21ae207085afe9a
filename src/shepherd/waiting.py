"""How an application waits on the store: for a task to end (`App.result`), for events (`App.events`).

Each loop takes the wake-up of its channel *before* it reads, and waits on it
only when the read found nothing new: a commit in this process rings it at
once, one in another process through the store's wake-ups; polling is the
fallback for a wake-up that was lost.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.errors import TaskFailedError
from shepherd.operations import unknown_task
from shepherd.store import signals as ch
from shepherd.store.signals import Signals

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from shepherd.core.records import Event, JsonValue
    from shepherd.store.contract import Store

__all__ = ["follow_events", "wait_result"]

#: The states a task ends in without a result.
_FAILED = (ProcessState.ERROR, ProcessState.COMPENSATED, ProcessState.CANCELLED)


async def wait_result(
    store: Store,
    task_id: str,
    *,
    timeout: float | None,  # noqa: ASYNC109 - App.result's, which mirrors asyncio.wait_for
    poll: float,
) -> JsonValue:
    """Wait for the task to end and return its result, looking again at least every `poll` s.

    Raises:
        TaskFailedError: The task ended compensated, cancelled or in error.
        TimeoutError: It did not end within `timeout` seconds.
        UnknownTaskError: No such task (or it was purged: the message says so).
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    await store.listen((ch.task_channel(task_id),))  # before the first look
    while True:
        wake = store.signals.event(ch.task_channel(task_id))
        task = await store.get_task(task_id)
        if task is None:
            raise await unknown_task(store, task_id)
        if task.process_state is ProcessState.PROCESSED:
            return task.result
        if task.process_state in _FAILED:
            raise TaskFailedError(task_id, str(task.process_state), task.error)
        wait = poll
        if deadline is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"task {task_id} did not end within {timeout}s")
            wait = min(wait, remaining)
        await Signals.wait(wake, wait)


async def follow_events(
    store: Store, reply_to: str | None, *, after_id: int, poll: float
) -> AsyncIterator[Event]:
    """Status events for `reply_to` (all events when None) after `after_id`, as they happen."""
    cursor = after_id
    await store.listen((ch.EVENTS,))
    while True:
        wake = store.signals.event(ch.EVENTS)
        batch = await store.read_events(reply_to=reply_to, after_id=cursor)
        for event in batch:
            cursor = event.id
            yield event
        if not batch:
            await Signals.wait(wake, poll)
