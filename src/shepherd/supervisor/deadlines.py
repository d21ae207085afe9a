"""Task deadlines, enforced by the supervisor: a task not ended by its deadline is cancelled.

Each scan of the leading supervisor cancels the tasks whose deadline has
passed on the store's clock while they were pending or processing
(`store.cancel_overdue`, fenced by the lease; `core.timing` decides what that
writes). Nothing here depends on a worker: with every scheduler and agent
down, the task still turns `compensating` by its deadline plus one scan
interval, and a scheduler that starts later undoes its completed steps and
ends it `cancelled`. The deadline is an instant stored with the task at
submit, so an outage of the supervisor delays the cancel but moves nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.timing import DEADLINE_PASSED
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from shepherd.core.records import Lease
    from shepherd.store.roles import SupervisorStore

__all__ = ["OVERDUE_BATCH", "cancel_overdue"]

log = logging.getLogger("shepherd.supervisor")

#: Most tasks one scan cancels for their deadline; the rest wait for the next scan.
OVERDUE_BATCH = 500


async def cancel_overdue(store: SupervisorStore, lease: Lease) -> int:
    """Cancel the tasks whose deadline has passed, as the holder of `lease`; how many.

    Raises:
        StoreUnavailableError: The store cannot be reached (the scan's caller retries).
    """
    due = await store.next_deadline()  # a read: an idle scan writes nothing for deadlines
    if due is None or due > store.now():
        return 0
    cancelled = await store.cancel_overdue(leader=lease, limit=OVERDUE_BATCH)
    for task in cancelled:
        task_event(
            task.id,
            task.workflow,
            EventKind.CANCEL_REQUESTED,
            DEADLINE_PASSED,
            epoch=task.lock_epoch,
        )
    return len(cancelled)
