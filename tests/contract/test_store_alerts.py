"""Stored operator alerts: written with the write that moves a task into `error`, listed, acknowledged.

Every write that moves a task into `error` (a supervisor's escalation, a crash
verdict's quarantine, an owner's failure into `error`) stores exactly one
alert in its own transaction, with the reason and failure count the alert
sinks are sent; a write fenced off stores none. An operator lists them
(newest first, all or the open ones) and acknowledges each once.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from dataclasses import replace
from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.core.states import ProcessState
from shepherd.core.supervision import Compensate, Escalate, Reset
from shepherd.errors import ConfigError, ShepherdError, StaleEpochError, UnknownAlertError
from shepherd.store.sqlite import path_from_url
from support.factories import claimed_task, leadership, step_start

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.core.records import Lease, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Backend, Stores

    #: One write to the task as read, by its owner or by the leader: the
    #: (reason, failure_count) of the alert it must store (None: it stores
    #: none), and its outcome (None for an owner's write).
    Write = Callable[[Store, Task, Lease], Awaitable[tuple[tuple[str, int] | None, object]]]

CRASHES = ("h:1:dead#1",)


async def _escalate(
    store: Store, task: Task, lease: Lease
) -> tuple[tuple[str, int] | None, object]:
    decision = Escalate(failure_count=task.failure_count + 1, reason="complete_by expired 3 times")
    outcome = await store.apply_supervision(task, decision, leader=lease)
    return (decision.reason, decision.failure_count), outcome


async def _quarantine(
    store: Store, task: Task, lease: Lease
) -> tuple[tuple[str, int] | None, object]:
    verdict = Escalate(
        failure_count=task.failure_count, reason="suspected poison", crashes=CRASHES, owner_deaths=1
    )
    outcome = await store.apply_crash(task, verdict, leader=lease)
    return (verdict.reason, task.failure_count), outcome


def _fail(state: ProcessState) -> Write:
    async def write(
        store: Store, task: Task, lease: Lease
    ) -> tuple[tuple[str, int] | None, object]:
        assert task.locked_by is not None
        error = {"reason": "workflow raised KeyError: 'sku' (a bug)", "type": "KeyError"}
        await store.fail_task(
            task.id, locked_by=task.locked_by, epoch=task.lock_epoch, state=state, error=error
        )
        raised = (error["reason"], task.failure_count) if state is ProcessState.ERROR else None
        return raised, None

    return write


async def _finish(store: Store, task: Task, lease: Lease) -> tuple[tuple[str, int] | None, object]:
    assert task.locked_by is not None
    await store.finish_task(task.id, locked_by=task.locked_by, epoch=task.lock_epoch, result=1)
    return None, None


async def _start_compensation(
    store: Store, task: Task, lease: Lease
) -> tuple[tuple[str, int] | None, object]:
    assert task.locked_by is not None
    await store.start_compensation(
        task.id, locked_by=task.locked_by, epoch=task.lock_epoch, error={"reason": "declined"}
    )
    return None, None


async def _reset(store: Store, task: Task, lease: Lease) -> tuple[tuple[str, int] | None, object]:
    decision = Reset(
        failure_count=task.failure_count + 1,
        not_before=store.now(),
        process_state=ProcessState.PENDING,
        reason="complete_by expired",
    )
    return None, await store.apply_supervision(task, decision, leader=lease)


async def _compensate(
    store: Store, task: Task, lease: Lease
) -> tuple[tuple[str, int] | None, object]:
    decision = Compensate(failure_count=0, reason="exhausted; compensating")
    return None, await store.apply_supervision(task, decision, leader=lease)


async def _crash_reset(
    store: Store, task: Task, lease: Lease
) -> tuple[tuple[str, int] | None, object]:
    verdict = Reset(
        failure_count=task.failure_count,
        not_before=store.now(),
        process_state=ProcessState.PENDING,
        reason="its owner died",
        crashes=CRASHES,
        owner_deaths=1,
    )
    return None, await store.apply_crash(task, verdict, leader=lease)


#: The writes that move a task into `error`: each stores one alert.
INTO_ERROR: dict[str, Write] = {
    "supervisor-escalate": _escalate,
    "crash-escalate": _quarantine,
    "fail-error": _fail(ProcessState.ERROR),
}
#: Every other write that ends or releases a task: none stores an alert.
ELSEWHERE: dict[str, Write] = {
    "finish": _finish,
    "fail-compensated": _fail(ProcessState.COMPENSATED),
    "fail-cancelled": _fail(ProcessState.CANCELLED),
    "start_compensation": _start_compensation,
    "supervisor-reset": _reset,
    "supervisor-compensate": _compensate,
    "crash-reset": _crash_reset,
}


async def _working(store: Store, *, key: str | None = "A-1") -> Task:
    """A claimed task of workflow `orders.pay` with one step running."""
    claimed = await claimed_task(store, workflow="orders.pay", key=key)
    await store.start_step(step_start(claimed, seq=1, agent="a"))
    task = await store.get_task(claimed.id)
    assert task is not None
    return task


async def _alerted(store: Store, *, key: str | None = None) -> StoredAlert:
    """A task failed into `error` by its owner; the alert that stored."""
    task = await _working(store, key=key)
    raised, _ = await INTO_ERROR["fail-error"](store, task, await leadership(store))
    assert raised is not None
    (alert, *_) = await store.list_alerts()
    assert alert.task_id == task.id
    return alert


async def _drop_alerts_table(backend: Backend, url: str) -> None:
    """Drop the alerts table behind the store's back, so that writing an alert fails."""
    if backend.name == "sqlite":
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            conn.execute("DROP TABLE alerts")
            conn.commit()
        return
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP TABLE alerts")


# -- which writes store an alert -------------------------------------------------
@pytest.mark.parametrize("write", sorted(INTO_ERROR))
async def test_a_write_into_error_stores_exactly_one_open_alert_with_the_sinks_reason(
    stores: Stores, store: Store, write: str
) -> None:
    task = await _working(store)

    raised, outcome = await INTO_ERROR[write](store, task, await leadership(store))

    assert outcome in (None, True)
    assert raised is not None
    reason, failure_count = raised
    after = await store.get_task(task.id)
    assert after is not None
    assert after.process_state is ProcessState.ERROR
    # Read by another connection, as another process (the CLI) reads it.
    (alert,) = await (await stores.connect()).list_alerts()
    assert alert == StoredAlert(
        id=alert.id,
        task_id=task.id,
        workflow="orders.pay",
        key="A-1",
        reason=reason,
        failure_count=failure_count,
        raised_at=store.now(),
    )
    assert alert.is_open
    assert await store.list_alerts(open_only=True) == [alert]


@pytest.mark.parametrize("write", sorted(ELSEWHERE))
async def test_a_write_that_does_not_move_the_task_into_error_stores_no_alert(
    store: Store, write: str
) -> None:
    task = await _working(store)

    raised, outcome = await ELSEWHERE[write](store, task, await leadership(store))

    assert raised is None
    assert outcome in (None, True)
    assert await store.list_alerts() == []


@pytest.mark.parametrize("write", sorted(INTO_ERROR))
async def test_a_fenced_off_write_into_error_stores_no_alert(store: Store, write: str) -> None:
    task = await _working(store)
    lease = await leadership(store)
    stale = replace(task, lock_epoch=task.lock_epoch - 1)

    try:
        _, outcome = await INTO_ERROR[write](store, stale, lease)
    except StaleEpochError:
        outcome = False

    assert outcome is False
    assert await store.list_alerts() == []
    after = await store.get_task(task.id)
    assert after is not None
    assert after.process_state is ProcessState.PROCESSING


@pytest.mark.parametrize("write", ["supervisor-escalate", "crash-escalate"])
async def test_an_escalation_by_a_former_leader_stores_no_alert(store: Store, write: str) -> None:
    task = await _working(store)
    former = await leadership(store)
    await store.release_lease(former.name, holder=former.holder)
    await leadership(store, holder="another")

    _, outcome = await INTO_ERROR[write](store, task, former)

    assert outcome is False
    assert await store.list_alerts() == []


@pytest.mark.parametrize("write", sorted(INTO_ERROR))
async def test_the_alert_is_written_in_the_transaction_that_moves_the_task_into_error(
    backend: Backend, stores: Stores, store: Store, write: str
) -> None:
    task = await _working(store)
    lease = await leadership(store)
    await _drop_alerts_table(backend, stores.url)

    # The alert cannot be written: the task's move into `error` is rolled back with it.
    with pytest.raises(ShepherdError, match="alerts"):
        await INTO_ERROR[write](store, task, lease)

    after = await (await stores.connect()).get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by, after.lock_epoch) == (
        ProcessState.PROCESSING,
        task.locked_by,
        task.lock_epoch,
    )


# -- listing ---------------------------------------------------------------------
async def test_alerts_are_listed_newest_first_all_or_the_open_ones_up_to_a_limit(
    store: Store, fake_clock: FakeClock
) -> None:
    first = await _alerted(store, key="A-1")
    fake_clock.advance(1.0)
    second = await _alerted(store, key="A-2")
    fake_clock.advance(1.0)
    third = await _alerted(store, key="A-3")
    acknowledged = await store.acknowledge_alert(second.id, by="anna")

    assert first.id < second.id < third.id
    assert [a.key for a in (first, second, third)] == ["A-1", "A-2", "A-3"]
    assert await store.list_alerts() == [third, acknowledged, first]
    assert await store.list_alerts(open_only=True) == [third, first]
    assert await store.list_alerts(limit=2) == [third, acknowledged]
    assert await store.list_alerts(open_only=True, limit=1) == [third]


async def test_a_tasks_own_alerts_are_listed_by_its_id(store: Store) -> None:
    first = await _alerted(store, key="B-1")
    second = await _alerted(store, key="B-2")
    acknowledged = await store.acknowledge_alert(first.id, by="anna")

    assert await store.list_alerts(task_id=first.task_id) == [acknowledged]
    assert await store.list_alerts(task_id=first.task_id, open_only=True) == []
    assert await store.list_alerts(task_id=second.task_id, open_only=True) == [second]
    assert await store.list_alerts(task_id="no-such-task") == []


# -- acknowledging ---------------------------------------------------------------
async def test_acknowledging_records_who_and_when_and_closes_the_alert(
    stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    alert = await _alerted(store)
    fake_clock.advance(30.0)

    acknowledged = await store.acknowledge_alert(alert.id, by="  anna  ")

    assert acknowledged == replace(
        alert,
        acknowledged_at=store.now(),
        acknowledged_by="anna",
        state=AlertState.ACKNOWLEDGED,
    )
    assert not acknowledged.is_open
    assert await store.list_alerts(open_only=True) == []
    assert await (await stores.connect()).list_alerts() == [acknowledged]


async def test_acknowledging_twice_keeps_the_first_acknowledgement(
    store: Store, fake_clock: FakeClock
) -> None:
    alert = await _alerted(store)
    first = await store.acknowledge_alert(alert.id, by="anna")
    fake_clock.advance(60.0)

    again = await store.acknowledge_alert(alert.id, by="bruno")

    assert again == first
    assert again.acknowledged_by == "anna"
    assert await store.list_alerts() == [first]


async def test_concurrent_acknowledgements_from_two_processes_keep_one(stores: Stores) -> None:
    one, two = await stores.connect(), await stores.connect()
    alert = await _alerted(one)

    outcomes = await asyncio.gather(
        one.acknowledge_alert(alert.id, by="anna"), two.acknowledge_alert(alert.id, by="bruno")
    )

    assert outcomes[0] == outcomes[1]
    assert outcomes[0].acknowledged_by in ("anna", "bruno")
    assert await one.list_alerts() == [outcomes[0]]


@pytest.mark.parametrize("alert_id", [999, 0, -1, 2**70])
async def test_acknowledging_an_unknown_alert_names_it_and_changes_nothing(
    store: Store, alert_id: int
) -> None:
    alert = await _alerted(store)

    with pytest.raises(UnknownAlertError, match=rf"unknown alert {alert_id}\b") as raised:
        await store.acknowledge_alert(alert_id, by="anna")

    assert raised.value.alert_id == alert_id
    assert await store.list_alerts() == [alert]


@pytest.mark.parametrize(
    ("by", "problem"),
    [
        ("", "'by' is empty"),
        ("   ", "'by' is empty"),
        ("x" * 801, "801 bytes of UTF-8, over its limit of 800 bytes"),
        ("anna\nbruno", "control character"),
        ("anna\x00", "control character"),
        (42, "is a str, not int"),
    ],
)
async def test_an_acknowledgement_without_a_usable_by_is_refused(
    store: Store, by: object, problem: str
) -> None:
    alert = await _alerted(store)

    with pytest.raises(ConfigError, match=problem) as raised:
        await store.acknowledge_alert(alert.id, by=by)  # type: ignore[arg-type]

    assert raised.value.field == "by"
    assert await store.list_alerts(open_only=True) == [alert]


@pytest.mark.parametrize("alert_id", ["1", 1.0, True, None])
async def test_an_alert_id_that_is_not_a_whole_number_is_refused(
    store: Store, alert_id: object
) -> None:
    alert = await _alerted(store)

    with pytest.raises(ConfigError, match="an alert's id is a whole number") as raised:
        await store.acknowledge_alert(alert_id, by="anna")  # type: ignore[arg-type]

    assert raised.value.field == "alert_id"
    assert await store.list_alerts(open_only=True) == [alert]


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
async def test_a_listing_limit_below_one_is_refused(store: Store, limit: object) -> None:
    with pytest.raises(ConfigError, match="at least 1") as raised:
        await store.list_alerts(limit=limit)  # type: ignore[arg-type]

    assert raised.value.field == "limit"


async def test_an_alert_outlives_a_retry_of_its_task(store: Store) -> None:
    alert = await _alerted(store)

    await store.retry_task(alert.task_id)

    assert await store.list_alerts(open_only=True) == [alert]
