"""Schedules, fired by the leading supervisor: one task per tick, whoever fires it.

Each scan of the leader reads the schedules and, for each one not paused,
asks `core.schedules.due_ticks` which ticks since the last one it looked at
become tasks (its catch-up policy decides about ticks missed in an outage).
It submits those tasks, each keyed by its schedule and tick
(`core.schedules.tick_key`), then records the newest tick looked at
(`store.advance_schedule`). The key makes a tick one task however often it is
fired: by a leader that died between the submit and the record and its
successor, or by two processes that both believed they led.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shepherd.core.schedules import due_ticks, tick_key
from shepherd.errors import ShepherdError, StoreUnavailableError
from shepherd.store.ops.tasks import NewTask
from shepherd.store.schedule_rows import ticks_of

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.schedules import StoredSchedule
    from shepherd.store.roles import SupervisorStore

__all__ = ["fire_schedules", "grace_of"]

log = logging.getLogger("shepherd.supervisor")


def grace_of(interval: float, lease_ttl: float) -> float:
    """Seconds after its instant within which a tick counts as on time, not missed.

    Twice a scan interval and a leadership lease: a running leader sees a
    tick within one interval, and a successor takes over within the lease's
    ttl and a third of it, then scans at once; so only an outage of every
    supervisor (or of the store) makes a tick missed.
    """
    return 2 * (interval + lease_ttl)


async def fire_schedules(store: SupervisorStore, *, grace: float) -> int:
    """Fire every due tick of every schedule not paused; how many tasks were created.

    Raises:
        StoreUnavailableError: The store cannot be reached (the scan's caller retries).
    """
    schedules = await store.list_schedules()
    if not schedules:
        return 0
    now = store.now()
    created = 0
    for stored in schedules:
        if stored.schedule.paused:
            continue
        try:
            created += await _fire(store, stored, now=now, grace=grace)
        except StoreUnavailableError:
            raise
        except ShepherdError as exc:  # a refused input: this schedule, not the others
            log.error("schedule %r could not fire: %s", stored.schedule.name, exc)
    return created


async def _fire(
    store: SupervisorStore, stored: StoredSchedule, *, now: datetime, grace: float
) -> int:
    s = stored.schedule
    firing = due_ticks(
        ticks_of(s),
        since=stored.since,
        now=now,
        catch_up=s.catch_up,
        max_catch_up=s.max_catch_up,
        grace=grace,
    )
    if firing.last is None:
        return 0
    tasks = [
        NewTask(workflow=s.workflow, input=s.data, key=tick_key(s.name, t)) for t in firing.ticks
    ]
    submitted = await store.submit_tasks(tasks)
    await store.advance_schedule(s.name, firing.last)
    if firing.missed:
        log.warning(
            "schedule %r missed %d ticks (catch_up=%s): fired %d task(s)",
            s.name,
            firing.missed,
            s.catch_up,
            len(tasks),
        )
    return sum(1 for x in submitted if x.created)
