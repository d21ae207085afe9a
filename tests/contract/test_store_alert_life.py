"""An alert follows its task: one open alert per task, raised again by a repeated failure, resolved
by a good end in the transaction that ends the task; counted, paged, and its resolution queued for
the sinks.

A task fails into `error` (its alert opens), is retried by an operator and
claimed again: failing again raises the same open alert again (a count, the
latest reason); after an acknowledgement a failure opens a new one. Ending in
any other state resolves every alert of the task not resolved yet (open or
acknowledged), says by what and when (store clock), and queues the
resolution until it is marked sent.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.core.states import ProcessState
from shepherd.core.supervision import Escalate
from shepherd.errors import ConfigError, ShepherdError
from shepherd.store.sqlite import path_from_url
from support.factories import claimed_task, leadership, step_start

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Backend, Stores

OWNER = "s1"


async def _working(store: Store, *, key: str | None = None) -> Task:
    """A claimed task of workflow `orders.pay` with one step running."""
    claimed = await claimed_task(store, workflow="orders.pay", key=key)
    await store.start_step(step_start(claimed, seq=1, agent="a"))
    return claimed


async def _reclaimed(store: Store, task_id: str) -> Task:
    """The task claimed again by OWNER (after a retry or a cancel)."""
    claimed = await store.claim_tasks(locked_by=OWNER, limit=10)
    assert [t.id for t in claimed] == [task_id]
    return claimed[0]


async def _fail(store: Store, task: Task, state: ProcessState, reason: str = "bug") -> None:
    assert task.locked_by is not None
    await store.fail_task(
        task.id,
        locked_by=task.locked_by,
        epoch=task.lock_epoch,
        state=state,
        error={"reason": reason},
    )


async def _finish(store: Store, task: Task) -> None:
    assert task.locked_by is not None
    await store.finish_task(task.id, locked_by=task.locked_by, epoch=task.lock_epoch, result=1)


async def _in_error(store: Store, *, key: str | None = None, reason: str = "bug") -> StoredAlert:
    """A task failed into `error` by its owner; its alert."""
    task = await _working(store, key=key)
    await _fail(store, task, ProcessState.ERROR, reason)
    (alert,) = await store.list_alerts(task_id=task.id)
    return alert


async def _retried(store: Store, task_id: str) -> Task:
    """The task retried by an operator, then claimed again."""
    await store.retry_task(task_id, by="anna")
    return await _reclaimed(store, task_id)


async def _drop_alerts_table(backend: Backend, url: str) -> None:
    """Drop the alerts table behind the store's back, so that any statement on it fails."""
    if backend.name == "sqlite":
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            conn.execute("DROP TABLE alerts")
            conn.commit()
        return
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP TABLE alerts")


# -- one open alert per task ---------------------------------------------------------
async def test_a_task_failing_again_while_its_alert_is_open_raises_that_alert_again(
    store: Store, fake_clock: FakeClock
) -> None:
    first = await _in_error(store, key="A-1", reason="card declined")
    fake_clock.advance(60.0)
    task = await _retried(store, first.task_id)

    await _fail(store, task, ProcessState.ERROR, "card declined again")

    (alert,) = await store.list_alerts()
    assert alert == StoredAlert(
        id=first.id,
        task_id=first.task_id,
        workflow="orders.pay",
        key="A-1",
        reason="card declined again",
        failure_count=0,
        raised_at=first.raised_at,
        state=AlertState.OPEN,
        times_raised=2,
        last_raised_at=store.now(),
    )
    assert alert.to_json()["times_raised"] == 2


async def test_a_supervisors_escalation_raises_the_open_alert_again(store: Store) -> None:
    first = await _in_error(store, reason="card declined")
    task = await _retried(store, first.task_id)
    decision = Escalate(failure_count=3, reason="complete_by expired 3 times")

    assert await store.apply_supervision(task, decision, leader=await leadership(store))

    (alert,) = await store.list_alerts()
    assert (alert.id, alert.times_raised, alert.reason, alert.failure_count) == (
        first.id,
        2,
        "complete_by expired 3 times",
        3,
    )


async def test_a_failure_after_an_acknowledgement_opens_a_new_alert(store: Store) -> None:
    first = await _in_error(store, reason="card declined")
    acknowledged = await store.acknowledge_alert(first.id, by="anna")
    task = await _retried(store, first.task_id)

    await _fail(store, task, ProcessState.ERROR, "card declined again")

    newer, older = await store.list_alerts()
    assert older == acknowledged
    assert older.state is AlertState.ACKNOWLEDGED
    assert (newer.state, newer.times_raised, newer.reason) == (
        AlertState.OPEN,
        1,
        "card declined again",
    )
    assert newer.id > older.id


async def test_the_store_refuses_a_second_open_alert_of_a_task(
    backend: Backend, stores: Stores, store: Store
) -> None:
    alert = await _in_error(store)
    insert = (
        "INSERT INTO alerts (task_id, workflow, reason, failure_count, raised_at) "
        "VALUES ('{task}', 'orders.pay', 'another', 0, {now})"
    )

    if backend.name == "sqlite":
        with (
            closing(sqlite3.connect(path_from_url(stores.url))) as conn,
            pytest.raises(sqlite3.IntegrityError, match="UNIQUE"),
        ):
            conn.execute(insert.format(task=alert.task_id, now="0"))
    else:
        async with await psycopg.AsyncConnection.connect(stores.url, autocommit=True) as conn:
            with pytest.raises(psycopg.errors.UniqueViolation, match="alerts_open_task"):
                await conn.execute(insert.format(task=alert.task_id, now="now()"))

    assert await store.list_alerts() == [alert]


# -- resolved by a good end ------------------------------------------------------------
@pytest.mark.parametrize("acknowledged", [False, True], ids=["open", "acknowledged"])
@pytest.mark.parametrize("end", ["processed", "compensated"])
async def test_a_task_that_ends_well_resolves_its_alert_in_the_same_write(
    stores: Stores, store: Store, fake_clock: FakeClock, end: str, acknowledged: bool
) -> None:
    alert = await _in_error(store)
    if acknowledged:
        alert = await store.acknowledge_alert(alert.id, by="anna")
    task = await _retried(store, alert.task_id)
    fake_clock.advance(30.0)

    if end == "processed":
        await _finish(store, task)
    else:
        await _fail(store, task, ProcessState.COMPENSATED, "declined; undone")

    (resolved,) = await (await stores.connect()).list_alerts()
    assert resolved == StoredAlert(
        id=alert.id,
        task_id=alert.task_id,
        workflow="orders.pay",
        key=None,
        reason="bug",
        failure_count=0,
        raised_at=alert.raised_at,
        acknowledged_at=alert.acknowledged_at,
        acknowledged_by=alert.acknowledged_by,
        state=AlertState.RESOLVED,
        resolved_at=store.now(),
        resolved_by=f"task {end}",
    )
    assert not resolved.is_open
    assert await store.list_alerts(open_only=True) == []
    assert await store.unsent_resolutions() == [resolved]


async def test_a_cancelled_task_resolves_its_alert_naming_the_operator_who_cancelled_it(
    store: Store,
) -> None:
    alert = await _in_error(store)
    await store.cancel_task(alert.task_id, by="bruno")
    task = await _reclaimed(store, alert.task_id)
    assert task.process_state is ProcessState.COMPENSATING

    await _fail(store, task, ProcessState.CANCELLED, "cancelled")

    (resolved,) = await store.list_alerts()
    assert (resolved.state, resolved.resolved_by) == (
        AlertState.RESOLVED,
        "task cancelled by bruno",
    )


async def test_a_compensation_started_resolves_nothing(
    store: Store,
) -> None:
    alert = await _in_error(store)
    task = await _retried(store, alert.task_id)
    assert task.locked_by is not None

    await store.start_compensation(
        task.id, locked_by=task.locked_by, epoch=task.lock_epoch, error={"reason": "declined"}
    )

    (still,) = await store.list_alerts()
    assert still == alert
    assert await store.unsent_resolutions() == []


async def test_a_task_ending_well_resolves_its_own_alerts_only(store: Store) -> None:
    mine = await _in_error(store, key="A-1")
    other = await _in_error(store, key="A-2")
    task = await _retried(store, mine.task_id)

    await _finish(store, task)

    assert [(a.id, a.state) for a in await store.list_alerts()] == [
        (other.id, AlertState.OPEN),
        (mine.id, AlertState.RESOLVED),
    ]


async def test_the_resolution_is_written_in_the_transaction_that_ends_the_task(
    backend: Backend, stores: Stores, store: Store
) -> None:
    alert = await _in_error(store)
    alerted = await _retried(store, alert.task_id)
    plain = await claimed_task(store, workflow="orders.pay")
    await _drop_alerts_table(backend, stores.url)

    # A task that never had an alert does not touch the alerts: it ends as ever.
    await _finish(store, plain)
    # One that had an alert cannot resolve it: its end is rolled back with it.
    with pytest.raises(ShepherdError, match="alerts"):
        await _finish(store, alerted)

    reader = await stores.connect()
    ended = await reader.get_task(plain.id)
    assert ended is not None
    assert ended.process_state is ProcessState.PROCESSED
    after = await reader.get_task(alerted.id)
    assert after is not None
    assert (after.process_state, after.lock_epoch) == (ProcessState.PROCESSING, alerted.lock_epoch)


# -- the resolutions' outbox -------------------------------------------------------------
async def test_resolutions_wait_until_marked_sent_and_a_mark_is_made_once(
    store: Store, fake_clock: FakeClock
) -> None:
    first, second = await _in_error(store, key="A-1"), await _in_error(store, key="A-2")
    for alert in (first, second):
        await _finish(store, await _retried(store, alert.task_id))
    unsent = await store.unsent_resolutions()
    assert [a.id for a in unsent] == [first.id, second.id]  # oldest first
    assert [a.id for a in await store.unsent_resolutions(limit=1)] == [first.id]

    await store.mark_resolutions_sent([first.id, 999])
    fake_clock.advance(5.0)
    await store.mark_resolutions_sent([first.id])

    assert [a.id for a in await store.unsent_resolutions()] == [second.id]
    await store.mark_resolutions_sent([second.id])
    assert await store.unsent_resolutions() == []


async def test_an_open_alert_is_never_marked_sent(store: Store) -> None:
    alert = await _in_error(store)

    await store.mark_resolutions_sent([alert.id])
    await _finish(store, await _retried(store, alert.task_id))

    assert [a.id for a in await store.unsent_resolutions()] == [alert.id]


# -- counting and paging --------------------------------------------------------------------
async def _five(store: Store) -> list[StoredAlert]:
    """Five alerts, oldest first: the second acknowledged, the fourth resolved."""
    alerts = [await _in_error(store, key=f"K-{n}") for n in range(5)]
    await store.acknowledge_alert(alerts[1].id, by="anna")
    await _finish(store, await _retried(store, alerts[3].task_id))
    return alerts


async def test_alerts_are_counted_all_or_in_one_state(store: Store) -> None:
    assert await store.count_alerts() == 0
    await _five(store)

    assert await store.count_alerts() == 5
    assert await store.count_alerts(state="open") == 3
    assert await store.count_alerts(state=AlertState.ACKNOWLEDGED) == 1
    assert await store.count_alerts(state="resolved") == 1
    assert await store.count_alerts(state="all") == 5


async def test_alerts_are_listed_a_page_at_a_time_before_or_after_an_alert(store: Store) -> None:
    ids = [a.id for a in await _five(store)]
    newest_first = ids[::-1]

    async def page(**query: object) -> list[int]:
        return [a.id for a in await store.list_alerts(limit=2, **query)]  # type: ignore[arg-type]

    assert await page() == newest_first[:2]
    assert await page(before=newest_first[1]) == newest_first[2:4]
    assert await page(before=newest_first[3]) == newest_first[4:]
    assert await page(after=newest_first[4]) == newest_first[2:4]  # the previous page
    assert await page(after=newest_first[2]) == newest_first[:2]
    assert await page(after=newest_first[0]) == []
    opened = [ids[4], ids[2], ids[0]]
    assert await page(state="open") == opened[:2]
    assert await page(state="open", before=opened[1]) == opened[2:]
    assert await page(state="open", after=opened[2]) == opened[:2]
    assert await page(state="resolved") == [ids[3]]
    assert await page(state="acknowledged", task_id=(await store.list_alerts())[3].task_id) == [
        ids[1]
    ]


@pytest.mark.parametrize(
    ("query", "field", "problem"),
    [
        ({"state": "closed"}, "state", "one of open, acknowledged, resolved or all"),
        ({"state": 3}, "state", "not 3"),
        ({"before": 0}, "before", "an alert's id"),
        ({"after": "3"}, "after", "an alert's id"),
        ({"before": 2**63}, "before", "an alert's id"),
        ({"before": 5, "after": 2}, "after", "not both"),
        ({"open_only": True, "state": "resolved"}, "state", "not resolved ones"),
    ],
)
async def test_a_listing_with_a_bad_state_or_cursor_is_refused(
    store: Store, query: dict[str, object], field: str, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        await store.list_alerts(**query)  # type: ignore[arg-type]

    assert raised.value.field == field


async def test_a_count_with_a_bad_state_is_refused(store: Store) -> None:
    with pytest.raises(ConfigError, match="not 'closed'") as raised:
        await store.count_alerts(state="closed")

    assert raised.value.field == "state"
