"""A task peeked at (`peek_tasks`) and claimed by its first write (`reply_then(..., claim=)`).

A scheduler with little to do reads the tasks a claim would take, replays
them, and claims each in the transaction of its first write: exactly as a
claim would (epoch bumped, `processing`, `complete_by`, a `claimed` event), but
only while the task is still pending, unowned, due and at the epoch it was
peeked at; otherwise nothing is written and the write's outcome is stale.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState, StepState
from shepherd.errors import StaleEpochError
from shepherd.store.contract import NewTask
from shepherd.store.ops import FailTask, FinishTask, StartStep
from support.factories import step_start, submitted_task

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store


def _epoch(task: Task) -> int:
    """The epoch the first write of `task`, peeked at, is fenced by: the claim's."""
    return task.lock_epoch + 1


async def test_a_peek_shows_what_a_claim_would_take_and_claims_nothing(store: Store) -> None:
    due = await submitted_task(store)
    await store.submit_task(NewTask(workflow="wf", input=None, delay=3600.0))

    (peeked,) = await store.peek_tasks(limit=10)

    assert peeked.id == due.id
    assert (peeked.locked_by, peeked.lock_epoch) == (None, 0)
    stored = await store.get_task(due.id)
    assert stored is not None
    assert stored.process_state is ProcessState.PENDING
    assert stored.locked_by is None


async def test_the_first_start_claims_the_task_as_a_claim_would(store: Store) -> None:
    task = await submitted_task(store)
    (peeked,) = await store.peek_tasks(limit=10)
    start = step_start(peeked, seq=1, locked_by="s1", epoch=_epoch(peeked))

    went = await store.reply_then((), then=StartStep(start), claim=peeked.lock_epoch)

    assert went.replies == ()
    assert isinstance(went.then, datetime)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.locked_by, stored.lock_epoch) == ("s1", 1)
    assert stored.process_state is ProcessState.PROCESSING
    assert stored.complete_by is not None
    assert [(s.seq, s.state) for s in stored.steps] == [(1, StepState.RUNNING)]
    kinds = [e.kind for e in await store.task_events(task.id)]
    assert kinds.count("claimed") == 1
    assert await store.peek_tasks(limit=10) == []
    assert await store.claim_tasks(locked_by="s2", limit=10) == []


async def test_a_task_claimed_meanwhile_is_not_claimed_again_and_nothing_is_written(
    store: Store,
) -> None:
    task = await submitted_task(store)
    (peeked,) = await store.peek_tasks(limit=10)
    (other,) = await store.claim_tasks(locked_by="s2", limit=10)

    went = await store.reply_then(
        (),
        then=StartStep(step_start(peeked, seq=1, locked_by="s1", epoch=_epoch(peeked))),
        claim=0,
    )

    assert isinstance(went.then, StaleEpochError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.locked_by, stored.lock_epoch) == ("s2", other.lock_epoch)
    assert stored.steps == ()


async def test_the_same_holder_cannot_claim_twice_at_one_epoch(store: Store) -> None:
    """A claim of its own by the same holder gives the task the epoch the peek expected:
    the first write's claim still fails (it is not pending and unowned any more)."""
    task = await submitted_task(store)
    (peeked,) = await store.peek_tasks(limit=10)
    await store.claim_tasks(locked_by="s1", limit=10)

    went = await store.reply_then(
        (),
        then=FinishTask(task.id, result=1, locked_by="s1", epoch=_epoch(peeked)),
        claim=0,
    )

    assert isinstance(went.then, StaleEpochError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.process_state is ProcessState.PROCESSING


async def test_a_task_not_due_or_at_another_epoch_is_not_claimed(store: Store) -> None:
    later = await store.submit_task(NewTask(workflow="wf", input=None, delay=3600.0))
    task = await submitted_task(store)

    not_due = await store.reply_then(
        (), then=FinishTask(later.task_id, result=1, locked_by="s1", epoch=1), claim=0
    )
    wrong_epoch = await store.reply_then(
        (), then=FinishTask(task.id, result=1, locked_by="s1", epoch=6), claim=5
    )

    assert isinstance(not_due.then, StaleEpochError)
    assert isinstance(wrong_epoch.then, StaleEpochError)
    for task_id in (later.task_id, task.id):
        stored = await store.get_task(task_id)
        assert stored is not None
        assert (stored.process_state, stored.locked_by) == (ProcessState.PENDING, None)


async def test_an_end_as_the_first_write_claims_and_ends_the_task(store: Store) -> None:
    done = await submitted_task(store)
    failed = await submitted_task(store)
    peeked = {t.id: t for t in await store.peek_tasks(limit=10)}

    finished = await store.reply_then(
        (),
        then=FinishTask(done.id, result={"ok": 1}, locked_by="s1", epoch=_epoch(peeked[done.id])),
        claim=0,
    )
    errored = await store.reply_then(
        (),
        then=FailTask(
            failed.id,
            state=ProcessState.ERROR,
            error={"reason": "unknown workflow"},
            locked_by="s1",
            epoch=_epoch(peeked[failed.id]),
        ),
        claim=0,
    )

    assert not isinstance(finished.then, Exception)
    assert not isinstance(errored.then, Exception)
    stored_done = await store.get_task(done.id)
    stored_failed = await store.get_task(failed.id)
    assert stored_done is not None
    assert stored_failed is not None
    assert (stored_done.process_state, stored_done.result) == (
        ProcessState.PROCESSED,
        {"ok": 1},
    )
    assert stored_failed.process_state is ProcessState.ERROR
    for task_id in (done.id, failed.id):
        kinds = [e.kind for e in await store.task_events(task_id)]
        assert kinds.count("claimed") == 1


async def test_a_woken_task_is_peeked_with_its_steps(store: Store) -> None:
    """A task that slept (its steps recorded, its claim given up) comes back with its steps."""
    task = await submitted_task(store)
    (claimed,) = await store.claim_tasks(locked_by="s1", limit=10)
    await store.start_step(step_start(claimed, seq=1))
    await store.sleep_task(
        task.id, locked_by="s1", epoch=claimed.lock_epoch, seq=2, wake_at=store.now()
    )

    (peeked,) = await store.peek_tasks(limit=10)

    assert peeked.id == task.id
    assert (peeked.locked_by, peeked.lock_epoch) == (None, claimed.lock_epoch)
    assert [s.seq for s in peeked.steps] == [1, 2]


async def test_a_claim_of_its_own_leaves_the_tasks_peeked_at_alone(store: Store) -> None:
    """A scheduler that peeked at tasks claims others meanwhile, never those (`skip`):
    a claim of the same holder would give a peeked task the very epoch its run expects."""
    peeked = await submitted_task(store)
    other = await submitted_task(store)

    claimed = await store.claim_tasks(locked_by="s1", limit=10, skip=[peeked.id])

    assert [t.id for t in claimed] == [other.id]
    stored = await store.get_task(peeked.id)
    assert stored is not None
    assert (stored.process_state, stored.locked_by) == (ProcessState.PENDING, None)
