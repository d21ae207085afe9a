"""`send_signal`, `wait_signal` and `task_signals`: a task's inbox of signals, and its waits.

`send_signal` stores a signal for a task named by id or by workflow and key
(once per idempotency key), refuses an unknown or ended task and a payload it
cannot keep (storing nothing), and consumes the signal into a running wait of
its name, making a waiting task claimable at once. `wait_signal`, fenced by the
claim, consumes the oldest signal of its name, times out, or records the wait
and gives up the claim until the timeout; it may ride with the replies of a
`reply_then`. `task_signals` lists a task's signals in the order sent.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core.records import Reply
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.errors import InvalidStateError, PayloadError, StaleEpochError, UnknownTaskError
from shepherd.store.ops import ReplyAndAck, StartStep, Waited, WaitSignal
from support.factories import claimed_task, step_start, submitted_task, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

HOUR = timedelta(hours=1)


async def test_a_wait_with_no_signal_records_its_step_and_gives_up_the_claim(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    timeout_at = fake_clock.now() + HOUR
    with pytest.raises(StaleEpochError):
        await store.wait_signal(
            task.id, locked_by="s2", epoch=task.lock_epoch, seq=1, name="go", timeout_at=None
        )

    waited = await store.wait_signal(
        task.id, locked_by="s1", epoch=task.lock_epoch, seq=1, name="go", timeout_at=timeout_at
    )

    assert waited == Waited(outcome="waiting")
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.process_state, stored.locked_by, stored.not_before) == (
        ProcessState.PENDING,
        None,
        timeout_at,
    )
    (step,) = stored.steps
    assert (step.kind, step.agent, step.state, step.complete_by) == (
        StepKind.SIGNAL,
        "ctx.wait_for:go",
        StepState.RUNNING,
        timeout_at,
    )
    assert "waiting" in [e.kind for e in await store.task_events(task.id)]
    # Not claimable before the timeout; at it, claimed again, the wait times out.
    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    fake_clock.advance(HOUR)
    (again,) = await store.claim_tasks(locked_by="s2", limit=10)
    late = await store.wait_signal(
        task.id, locked_by="s2", epoch=again.lock_epoch, seq=1, name="go", timeout_at=timeout_at
    )
    assert late == Waited(outcome="timed_out")
    timed_out = await store.get_task(task.id)
    assert timed_out is not None
    assert timed_out.process_state is ProcessState.PROCESSING  # the claim is kept
    assert timed_out.steps[0].state is StepState.FAILED
    # A signal after the timeout stays in the inbox for the next wait of its name.
    sent = await store.send_signal(task.id, "go", {"late": True})
    assert not sent.delivered
    again_waited = await store.wait_signal(
        task.id, locked_by="s2", epoch=again.lock_epoch, seq=2, name="go", timeout_at=None
    )
    assert again_waited == Waited(outcome="received", payload={"late": True})


async def test_a_signal_sent_first_is_consumed_by_the_wait_in_order_and_once(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    first = await store.send_signal(task.id, "item", 1, idempotency_key="k1", by="ops")
    second = await store.send_signal(task.id, "item", 2)
    other = await store.send_signal(task.id, "other", "x")
    repeated = await store.send_signal(task.id, "item", 99, idempotency_key="k1")
    assert (first.duplicate, repeated.duplicate, repeated.id) == (False, True, first.id)
    assert first.id < second.id < other.id

    got = [
        await store.wait_signal(
            task.id, locked_by="s1", epoch=task.lock_epoch, seq=seq, name="item", timeout_at=None
        )
        for seq in (1, 2)
    ]

    assert [w.payload for w in got] == [1, 2]
    signals = await store.task_signals(task.id)
    assert [(s.name, s.payload, s.consumed_seq) for s in signals] == [
        ("item", 1, 1),
        ("item", 2, 2),
        ("other", "x", None),
    ]
    assert signals[0].idempotency_key == "k1"
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.locked_by == "s1"  # consuming keeps the claim
    assert [(s.seq, s.state, s.result) for s in stored.steps] == [
        (1, StepState.COMPLETED, 1),
        (2, StepState.COMPLETED, 2),
    ]
    events = [e for e in await store.task_events(task.id) if e.kind == "signalled"]
    assert events[0].detail == {"name": "item", "signal": first.id, "by": "ops"}
    assert len(events) == 3


async def test_a_signal_to_a_waiting_task_is_delivered_and_wakes_it_now(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, key="order-1")
    await store.wait_signal(
        task.id, locked_by="s1", epoch=task.lock_epoch, seq=1, name="go", timeout_at=None
    )
    fake_clock.advance(60.0)

    sent = await store.send_signal(None, "go", {"ok": 1}, workflow=task.workflow, key="order-1")

    assert (sent.task_id, sent.delivered) == (task.id, True)
    woken = await store.get_task(task.id)
    assert woken is not None
    assert woken.not_before == fake_clock.now()
    assert [(s.state, s.result) for s in woken.steps] == [(StepState.COMPLETED, {"ok": 1})]
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    replayed = await store.wait_signal(
        task.id, locked_by="s2", epoch=claimed.lock_epoch, seq=1, name="go", timeout_at=None
    )
    assert replayed == Waited(outcome="received", payload={"ok": 1})
    assert [s.consumed_seq for s in await store.task_signals(task.id)] == [1]
    assert "signal_received" in [e.kind for e in await store.task_events(task.id)]


async def test_a_bad_signal_is_refused_and_stores_nothing(store: Store) -> None:
    ended = await claimed_task(store, locked_by="s1")
    await store.finish_task(ended.id, locked_by="s1", epoch=ended.lock_epoch, result=None)
    waiting = await submitted_task(store)
    with pytest.raises(UnknownTaskError, match="no-such-task"):
        await store.send_signal("no-such-task", "go", 1)
    with pytest.raises(UnknownTaskError, match="wf/nope"):
        await store.send_signal(None, "go", 1, workflow="wf", key="nope")
    with pytest.raises(PayloadError):
        await store.send_signal(waiting.id, "go", "x" * (2 * 1024 * 1024))
    with pytest.raises(PayloadError):
        await store.send_signal(waiting.id, "go", "\x00")
    with pytest.raises(InvalidStateError, match="it is processed"):
        await store.send_signal(ended.id, "go", 1)
    assert await store.task_signals(waiting.id) == []
    assert await store.task_signals(ended.id) == []
    assert "signalled" not in [e.kind for e in await store.task_events(waiting.id)]


async def test_a_wait_rides_with_the_replies_of_reply_then(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.send_signal(task.id, "go", "yes")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")

    went = await store.reply_then(
        [ReplyAndAck(request, worker="w1", ok=True, body={"n": 1}, recorder="s1")],
        then=WaitSignal(
            task.id, locked_by="s1", epoch=task.lock_epoch, seq=2, name="go", timeout_at=None
        ),
    )

    (answer,) = went.replies
    assert isinstance(answer, Reply)
    assert went.then == Waited(outcome="received", payload="yes")
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [(s.seq, s.kind, s.state) for s in stored.steps] == [
        (1, StepKind.FORWARD, StepState.COMPLETED),
        (2, StepKind.SIGNAL, StepState.COMPLETED),
    ]
    assert stored.locked_by == "s1"


async def test_a_purged_task_takes_its_signals_with_it(store: Store, fake_clock: FakeClock) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.send_signal(task.id, "go", 1)
    await store.send_signal(task.id, "unread", 2)
    await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=None)
    fake_clock.advance(60.0)

    assert await store.purge_tasks(ended_before=fake_clock.now(), limit=10) == 1

    assert await store.task_signals(task.id) == []


def _wait(task_id: str, seq: int, epoch: int) -> WaitSignal:
    return WaitSignal(task_id, locked_by="s1", epoch=epoch, seq=seq, name="go", timeout_at=None)


async def test_a_wait_that_found_its_signal_rides_with_the_next_start(store: Store) -> None:
    """`reply_then(..., waits=)`: the signal consumed into its wait, then the next step started,
    in one transaction; the next signal of the name is left for the next wait."""
    task = await claimed_task(store, locked_by="s1")
    first = await store.send_signal(task.id, "go", {"n": 1})
    second = await store.send_signal(task.id, "go", {"n": 2})

    went = await store.reply_then(
        (),
        then=StartStep(step_start(task, seq=2)),
        waits=[_wait(task.id, 1, task.lock_epoch)],
    )

    assert not isinstance(went.then, Exception)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [(s.seq, s.kind, s.state, s.result) for s in stored.steps] == [
        (1, StepKind.SIGNAL, StepState.COMPLETED, {"n": 1}),
        (2, StepKind.FORWARD, StepState.RUNNING, None),
    ]
    signals = await store.task_signals(task.id)
    assert [(s.id, s.consumed_seq) for s in signals] == [(first.id, 1), (second.id, None)]


async def test_a_riding_wait_whose_signal_is_gone_stops_the_write(store: Store) -> None:
    """No signal left for the wait: it is recorded as `wait_signal` records it (the claim given
    up), and the write it rode with is not made."""
    task = await claimed_task(store, locked_by="s1")

    went = await store.reply_then(
        (),
        then=StartStep(step_start(task, seq=2)),
        waits=[_wait(task.id, 1, task.lock_epoch)],
    )

    assert isinstance(went.then, StaleEpochError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [(s.seq, s.kind, s.state) for s in stored.steps] == [
        (1, StepKind.SIGNAL, StepState.RUNNING)
    ]
    assert (stored.process_state, stored.locked_by) == (ProcessState.PENDING, None)
