"""Writes decided in `core.effects`: every store stores, records and rings what the effect says.

The owner's end of a task (finish, fail, start_compensation), the supervisor's
decisions and its crash verdicts each write exactly `effects.apply_effect` of
the effect core returns, append the effect's event, drop the task's queued
requests if it says so, and ring the schedulers (a revoked claim) and the
task's waiters (a task that ends), only when the write took place.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core import effects
from shepherd.core.effects import Claim, apply_effect
from shepherd.core.states import ProcessState
from shepherd.core.supervision import Compensate, Escalate, Reset
from shepherd.errors import StaleEpochError
from shepherd.store import signals as ch
from support.factories import claimed_task, leadership, snapshot, step_start

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.core.effects import TaskEffect
    from shepherd.core.records import Lease, Task
    from shepherd.store.contract import Store

    #: Makes one write to the task as read, by its owner or by the leader; returns
    #: the effect core decides for it and the write's outcome (None for an owner's).
    Write = Callable[[Store, Task, Lease], Awaitable[tuple[TaskEffect, object]]]

CRASHES = ("h:1:dead#1",)


async def _finish(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    assert task.locked_by is not None
    result = {"total": 3}
    await store.finish_task(task.id, locked_by=task.locked_by, epoch=task.lock_epoch, result=result)
    return effects.on_finish(result), None


def _fail(state: ProcessState) -> Write:
    async def write(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
        assert task.locked_by is not None
        error = {"type": "Declined", "seq": 1}
        await store.fail_task(
            task.id, locked_by=task.locked_by, epoch=task.lock_epoch, state=state, error=error
        )
        return effects.on_fail(state, error), None

    return write


async def _start_compensation(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    assert task.locked_by is not None
    error = {"type": "Declined"}
    await store.start_compensation(
        task.id, locked_by=task.locked_by, epoch=task.lock_epoch, error=error
    )
    return effects.on_start_compensation(error), None


async def _reset(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    decision = Reset(
        failure_count=task.failure_count + 1,
        not_before=store.now() + timedelta(seconds=7),
        process_state=ProcessState.PENDING,
        reason="complete_by expired",
    )
    outcome = await store.apply_supervision(task, decision, leader=lease)
    return effects.on_supervision(decision, now=store.now()), outcome


async def _escalate(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    decision = Escalate(failure_count=task.failure_count + 1, reason="exhausted")
    outcome = await store.apply_supervision(task, decision, leader=lease)
    return effects.on_supervision(decision, now=store.now()), outcome


async def _compensate(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    decision = Compensate(failure_count=0, reason="exhausted; compensating")
    outcome = await store.apply_supervision(task, decision, leader=lease)
    return effects.on_supervision(decision, now=store.now()), outcome


async def _crash_reset(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    verdict = Reset(
        failure_count=task.failure_count,
        not_before=store.now() + timedelta(seconds=3),
        process_state=ProcessState.PENDING,
        reason="its owner died",
        crashes=CRASHES,
        owner_deaths=1,
    )
    outcome = await store.apply_crash(task, verdict, leader=lease)
    return effects.on_crash(verdict), outcome


async def _crash_escalate(store: Store, task: Task, lease: Lease) -> tuple[TaskEffect, object]:
    verdict = Escalate(failure_count=task.failure_count, reason="poison", crashes=CRASHES)
    outcome = await store.apply_crash(task, verdict, leader=lease)
    return effects.on_crash(verdict), outcome


WRITES: dict[str, Write] = {
    "finish": _finish,
    "fail-error": _fail(ProcessState.ERROR),
    "fail-cancelled": _fail(ProcessState.CANCELLED),
    "start_compensation": _start_compensation,
    "supervisor-reset": _reset,
    "supervisor-escalate": _escalate,
    "supervisor-compensate": _compensate,
    "crash-reset": _crash_reset,
    "crash-escalate": _crash_escalate,
}


async def _working(store: Store) -> Task:
    """A claimed task with one step running: its request queued."""
    claimed = await claimed_task(store)
    await store.start_step(step_start(claimed, seq=1, agent="a"))
    task = await store.get_task(claimed.id)
    assert task is not None
    return task


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_stores_records_and_rings_what_core_decides(store: Store, write: str) -> None:
    task = await _working(store)
    lease = await leadership(store)
    schedulers = store.signals.event(ch.TASKS)
    waiters = store.signals.event(ch.task_channel(task.id))

    effect, outcome = await WRITES[write](store, task, lease)

    assert outcome in (None, True)
    assert await store.get_task(task.id) == apply_effect(task, effect, now=store.now())
    last = (await store.task_events(task.id))[-1]
    assert (last.kind, last.detail) == (effect.event, effect.event_detail())
    queued = await store.take_requests(agents=["a"], worker="w", limit=10)
    assert [r.task_id for r in queued] == ([] if effect.drop_requests else [task.id])
    assert schedulers.is_set() == (effect.claim is Claim.REVOKED)
    assert waiters.is_set() == effect.terminal


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_fenced_off_write_changes_nothing_and_rings_nothing(
    store: Store, write: str
) -> None:
    task = await _working(store)
    lease = await leadership(store)
    before = await snapshot(store, task.id)
    schedulers = store.signals.event(ch.TASKS)
    waiters = store.signals.event(ch.task_channel(task.id))
    stale = replace(task, lock_epoch=task.lock_epoch - 1)

    try:
        _, outcome = await WRITES[write](store, stale, lease)
    except StaleEpochError:
        outcome = False

    assert outcome is False
    assert await snapshot(store, task.id) == before
    assert not schedulers.is_set()
    assert not waiters.is_set()


@pytest.mark.parametrize("write", ["supervisor-escalate", "crash-escalate"])
async def test_a_verdict_by_a_former_leader_rings_nothing(store: Store, write: str) -> None:
    task = await _working(store)
    former = await leadership(store)
    await store.release_lease(former.name, holder=former.holder)
    await leadership(store, holder="another")
    before = await snapshot(store, task.id)
    schedulers = store.signals.event(ch.TASKS)
    waiters = store.signals.event(ch.task_channel(task.id))

    _, outcome = await WRITES[write](store, task, former)

    assert outcome is False
    assert await snapshot(store, task.id) == before
    assert not schedulers.is_set()
    assert not waiters.is_set()


async def test_fail_into_a_state_that_is_not_an_end_is_refused(store: Store) -> None:
    task = await _working(store)
    assert task.locked_by is not None
    before = await snapshot(store, task.id)

    with pytest.raises(ValueError, match="not 'processed'"):
        await store.fail_task(
            task.id,
            locked_by=task.locked_by,
            epoch=task.lock_epoch,
            state=ProcessState.PROCESSED,
            error={"e": 1},
        )

    assert await snapshot(store, task.id) == before
