"""Child workflows in the store: `start_child`, `wait_children`, `end_child`, `cancel_children`,
and the operator's cancel reaching a task's children.

`start_child` records the parent's child step and inserts the child and its
link in one transaction, fenced by the parent's claim, refusing a bad input,
a taken key or a chain too deep with nothing written. `wait_children` gives
up the claim until an awaited child ends (at once if one did). `end_child`
ends a child as its end alone would, and records its parent's step and wakes
the parent in the same transaction. `cancel_children` cancels the children
that go with their parent, and theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from shepherd.core.children import MAX_DEPTH, child_links, parent_of
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.core.timing import LATEST_DUE
from shepherd.errors import ConfigError, PayloadError, StaleEpochError
from shepherd.store.contract import NewTask
from shepherd.store.ops import EndChild, FailTask, FinishTask
from support.factories import claimed_task, leadership

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def _start(
    store: Store,
    parent: Task,
    seq: int,
    *,
    policy: str = "wait",
    wait: bool = False,
    key: str | None = None,
    workflow: str = "child",
) -> str:
    return await store.start_child(
        parent.id,
        locked_by=parent.locked_by or "s1",
        epoch=parent.lock_epoch,
        seq=seq,
        child_id=f"{parent.id}.{seq}",
        workflow=workflow,
        input={"n": seq},
        key=key,
        on_parent_end=policy,
        complete_within=30.0,
        wait=wait,
    )


async def _task(store: Store, task_id: str) -> Task:
    task = await store.get_task(task_id)
    assert task is not None
    return task


async def test_a_child_starts_with_its_step_and_link_in_the_parents_claim(store: Store) -> None:
    parent = await claimed_task(store)

    awaited = await _start(store, parent, 1)
    started = await _start(store, parent, 2, policy="cancel")

    assert (awaited, started) == (f"{parent.id}.1", f"{parent.id}.2")
    after = await _task(store, parent.id)
    assert after.locked_by == "s1"  # it keeps its claim
    one, two = after.steps
    assert (one.kind, one.state, one.agent, one.result) == (
        StepKind.CHILD,
        StepState.RUNNING,
        "child",
        None,
    )
    assert (two.kind, two.state, two.result) == (StepKind.CHILD, StepState.COMPLETED, started)
    child = await _task(store, awaited)
    assert (child.process_state, child.workflow, child.input) == (
        ProcessState.PENDING,
        "child",
        {"n": 1},
    )
    assert child_links(parent.id, after.steps) == [
        (1, awaited, "child", "wait"),
        (2, started, "child", "cancel"),
    ]
    assert parent_of(awaited) == (parent.id, 1)
    assert "child_started" in [e.kind for e in await store.task_events(parent.id)]


async def test_a_refused_child_writes_nothing(store: Store) -> None:
    parent = await claimed_task(store)
    taken = await _start(store, parent, 1, policy="continue", key="k")

    with pytest.raises(StaleEpochError):
        await store.start_child(
            parent.id,
            locked_by="s1",
            epoch=parent.lock_epoch + 1,
            seq=2,
            child_id=f"{parent.id}.2",
            workflow="child",
            input=None,
            key=None,
            on_parent_end="wait",
            complete_within=30.0,
        )
    with pytest.raises(PayloadError):
        await store.start_child(
            parent.id,
            locked_by="s1",
            epoch=parent.lock_epoch,
            seq=2,
            child_id=f"{parent.id}.2",
            workflow="child",
            input={"x": float("nan")},
            key=None,
            on_parent_end="wait",
            complete_within=30.0,
        )
    with pytest.raises(ConfigError, match=f"already names task {taken}"):
        await _start(store, parent, 2, key="k")

    after = await _task(store, parent.id)
    assert [s.seq for s in after.steps] == [1]
    assert await store.get_task(f"{parent.id}.2") is None
    assert [link[0] for link in child_links(parent.id, after.steps)] == [1]


async def test_a_chain_of_children_deeper_than_the_limit_is_refused(store: Store) -> None:
    task = await claimed_task(store)
    for _ in range(MAX_DEPTH):
        child = await _start(store, task, 1, policy="continue")
        # Give the claim up so that the child alone is claimable.
        await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=None)
        (task,) = await store.claim_tasks(locked_by="s1", limit=10)
        assert task.id == child
    with pytest.raises(ConfigError, match=f"at most {MAX_DEPTH} deep"):
        await _start(store, task, 1)
    assert await store.get_task(f"{task.id}.1") is None


async def test_a_parent_waits_without_its_claim_until_a_child_ends(
    store: Store, fake_clock: FakeClock
) -> None:
    parent = await claimed_task(store)
    child_id = await _start(store, parent, 1, wait=True)

    parked = await _task(store, parent.id)
    assert (parked.process_state, parked.locked_by, parked.not_before) == (
        ProcessState.PENDING,
        None,
        LATEST_DUE,
    )
    (child,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert child.id == child_id  # the parent is not claimable

    await store.end_child(
        FinishTask(child.id, locked_by="s2", epoch=child.lock_epoch, result={"ok": 1})
    )

    ended = await _task(store, child_id)
    assert (ended.process_state, ended.result) == (ProcessState.PROCESSED, {"ok": 1})
    woken = await _task(store, parent.id)
    assert woken.not_before == fake_clock.now()
    (step,) = woken.steps
    assert (step.state, step.result) == (StepState.COMPLETED, {"ok": 1})
    assert "child_ended" in [e.kind for e in await store.task_events(parent.id)]
    (again,) = await store.claim_tasks(locked_by="s3", limit=10)
    assert again.id == parent.id


async def test_a_failed_child_fails_its_step_with_its_reason(store: Store) -> None:
    parent = await claimed_task(store)
    child_id = await _start(store, parent, 1)
    await store.wait_children(parent.id, locked_by="s1", epoch=parent.lock_epoch, seqs=[1])
    (child,) = await store.claim_tasks(locked_by="s2", limit=10)

    # A stale end writes nothing, here or on the parent.
    with pytest.raises(StaleEpochError):
        await store.end_child(
            FailTask(
                child.id,
                locked_by="s2",
                epoch=child.lock_epoch + 1,
                state=ProcessState.COMPENSATED,
                error={"reason": "no"},
            )
        )
    assert (await _task(store, parent.id)).steps[0].state is StepState.RUNNING

    await store.end_child(
        FailTask(
            child.id,
            locked_by="s2",
            epoch=child.lock_epoch,
            state=ProcessState.COMPENSATED,
            error={"reason": "out of stock"},
        )
    )

    (step,) = (await _task(store, parent.id)).steps
    assert step.state is StepState.FAILED
    assert step.error["message"] == f"child task {child_id} ended compensated: out of stock"
    assert step.error["reason"] == {"reason": "out of stock"}


async def test_a_child_in_error_leaves_its_parent_waiting(store: Store) -> None:
    parent = await claimed_task(store)
    await _start(store, parent, 1, wait=True)
    (child,) = await store.claim_tasks(locked_by="s2", limit=10)

    await store.end_child(
        FailTask(
            child.id,
            locked_by="s2",
            epoch=child.lock_epoch,
            state=ProcessState.ERROR,
            error={"reason": "a bug"},
        )
    )

    after = await _task(store, parent.id)
    assert after.not_before == LATEST_DUE
    assert after.steps[0].state is StepState.RUNNING


async def test_a_wait_after_a_child_ended_leaves_the_parent_claimable_at_once(
    store: Store, fake_clock: FakeClock
) -> None:
    parent = await claimed_task(store)
    await _start(store, parent, 1)
    await _start(store, parent, 2)
    first = await _task(store, f"{parent.id}.1")
    (child, _) = await store.claim_tasks(locked_by="s2", limit=10)
    assert child.id == first.id
    await store.end_child(FinishTask(child.id, locked_by="s2", epoch=child.lock_epoch, result=1))

    with pytest.raises(StaleEpochError):
        await store.wait_children(parent.id, locked_by="s9", epoch=parent.lock_epoch, seqs=[1, 2])
    await store.wait_children(parent.id, locked_by="s1", epoch=parent.lock_epoch, seqs=[1, 2])

    after = await _task(store, parent.id)
    assert (after.locked_by, after.not_before) == (None, fake_clock.now())


async def test_an_ending_parent_cancels_the_children_that_go_with_it(store: Store) -> None:
    parent = await claimed_task(store)
    kept = await _start(store, parent, 1, policy="continue")
    dropped = await _start(store, parent, 2, policy="cancel")
    awaited = await _start(store, parent, 3)
    claimed = await store.claim_tasks(locked_by="s2", limit=10)
    grandchild_parent = next(t for t in claimed if t.id == kept)
    grandchild = await _start(store, grandchild_parent, 1, policy="continue")

    with pytest.raises(StaleEpochError):
        await store.cancel_children(parent.id, locked_by="s1", epoch=parent.lock_epoch + 5)
    cancelled = await store.cancel_children(parent.id, locked_by="s1", epoch=parent.lock_epoch)

    assert cancelled == [dropped, awaited]
    for task_id in (dropped, awaited):
        task = await _task(store, task_id)
        assert (task.process_state, task.cancel_requested) == (ProcessState.COMPENSATING, True)
        assert task.error == {"reason": f"cancelled with its parent {parent.id}"}
    assert (await _task(store, kept)).process_state is ProcessState.PROCESSING
    assert (await _task(store, grandchild)).process_state is ProcessState.PENDING


async def test_cancelling_a_task_cancels_its_children_and_theirs(store: Store) -> None:
    parent = await claimed_task(store)
    child_id = await _start(store, parent, 1, policy="continue")
    (child,) = await store.claim_tasks(locked_by="s2", limit=10)
    grandchild = await _start(store, child, 1, policy="continue")

    await store.cancel_task(parent.id)

    for task_id, by in ((child_id, parent.id), (grandchild, child_id)):
        task = await _task(store, task_id)
        assert (task.process_state, task.locked_by) == (ProcessState.COMPENSATING, None)
        assert task.error == {"reason": f"cancelled with its parent {by}"}
    # The child's scheduler is fenced off.
    with pytest.raises(StaleEpochError):
        await store.end_child(
            FinishTask(child.id, locked_by="s2", epoch=child.lock_epoch, result=None)
        )


async def test_a_task_without_a_parent_ends_as_its_end_alone(store: Store) -> None:
    task = await claimed_task(store)
    await store.write(
        EndChild(FinishTask(task.id, locked_by="s1", epoch=task.lock_epoch, result=2))
    )
    ended = await _task(store, task.id)
    assert (ended.process_state, ended.result) == (ProcessState.PROCESSED, 2)


async def test_a_purge_deletes_a_parent_and_its_child_with_their_link(
    store: Store, fake_clock: FakeClock
) -> None:
    parent = await claimed_task(store)
    child_id = await _start(store, parent, 1, policy="continue")
    await store.finish_task(parent.id, locked_by="s1", epoch=parent.lock_epoch, result=None)
    (child,) = await store.claim_tasks(locked_by="s2", limit=10)
    await store.end_child(FinishTask(child.id, locked_by="s2", epoch=child.lock_epoch, result=1))
    fake_clock.advance(10.0)

    assert await store.purge_tasks(ended_before=fake_clock.now(), limit=10) == 2

    assert await store.get_task(child_id) is None
    assert await store.get_task(parent.id) is None


async def test_a_task_cancelled_at_its_deadline_cancels_its_children(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.submit_task(NewTask(workflow="wf", input=None, deadline=60.0))
    (parent,) = await store.claim_tasks(locked_by="s1", limit=10)
    child_id = await _start(store, parent, 1, wait=True)
    fake_clock.advance(61.0)
    lease = await leadership(store)

    (cancelled,) = await store.cancel_overdue(leader=lease, limit=10)

    assert cancelled.id == parent.id
    child = await _task(store, child_id)
    assert (child.process_state, child.error) == (
        ProcessState.COMPENSATING,
        {"reason": f"cancelled with its parent {parent.id}"},
    )
