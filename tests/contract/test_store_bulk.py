"""Triage in bulk at store level: counts with a cap, matching ids, retry and acknowledge many, keys."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.bulk import BulkAction, Refusal
from shepherd.core.states import ProcessState, StepState
from shepherd.errors import ConfigError
from shepherd.store.ops import IdempotencyKey
from support.factories import claimed_task, new_task, step_start, taken_request, tasks_in_error

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

_OWNER = "s1"


async def _in_error(
    store: Store, fake_clock: FakeClock, n: int, *, workflow: str = "wf"
) -> list[str]:
    """`n` new tasks failed into `error` by their owner (each stores an alert), oldest first."""
    return await tasks_in_error(store, n, workflow=workflow, locked_by=_OWNER, clock=fake_clock)


async def test_a_count_is_exact_up_to_its_cap_then_says_more(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = [(await store.submit_task(new_task("wf-a"))).task_id for _ in range(5)]
    await store.submit_task(new_task("wf-b"))

    assert (await store.count_matching()).count == 6
    exact = await store.count_matching(workflow="wf-a", cap=5)
    assert (exact.count, exact.more, exact.shown()) == (5, False, "5")
    capped = await store.count_matching(workflow="wf-a", cap=4)
    assert (capped.count, capped.more, capped.shown()) == (4, True, "4+")
    assert (await store.count_matching(states=[ProcessState.ERROR])).count == 0
    assert (await store.count_matching(id_prefix=ids[2])).count == 1
    assert (await store.count_matching(key="nope")).count == 0
    # Two states (two ranges of the index, one after the other) and the cursor ignored.
    await store.claim_tasks(locked_by=_OWNER, limit=1)
    both = await store.count_matching(
        states=[ProcessState.PENDING, ProcessState.PROCESSING], workflow="wf-a"
    )
    assert both.count == 5
    with pytest.raises(ConfigError, match="cap"):
        await store.count_matching(cap=0)


async def test_matching_ids_are_those_the_list_shows_on_every_page(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 4)
    await store.submit_task(new_task("wf"))

    assert await store.matching_task_ids(states=[ProcessState.ERROR]) == ids[::-1]
    assert await store.matching_task_ids(states=[ProcessState.ERROR], limit=2) == ids[:1:-1]
    assert await store.matching_task_ids(key="wf-1") == [ids[1]]


async def test_retry_many_retries_each_from_its_failed_step_and_refuses_the_rest(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 3)
    pending = (await store.submit_task(new_task("wf"))).task_id

    outcome = await store.retry_tasks([*ids, pending, "no-such-task", ids[0]], by="anna")

    assert outcome.action is BulkAction.RETRY
    assert outcome.done == tuple(ids)
    assert outcome.refused == (
        Refusal(task_id=pending, reason="it is pending, not error"),
        Refusal(task_id="no-such-task", reason="no such task"),
    )
    assert outcome.of == 5  # the repeated id counts once
    for task_id in ids:
        task = await store.get_task(task_id)
        assert task is not None
        assert task.process_state is ProcessState.PENDING
        (retried,) = [e.detail for e in await store.task_events(task_id) if e.kind == "retried"]
        assert retried == {
            "seq": None,
            "state": "pending",
            "by": "anna",
            "bulk": outcome.bulk,
            "of": 5,
        }
    # Their state changed: a second bulk retry refuses every one, and changes nothing.
    again = await store.retry_tasks(ids, by="anna")
    assert again.done == ()
    assert {r.reason for r in again.refused} == {"it is pending, not error"}


async def test_acknowledging_many_closes_each_tasks_open_alerts_and_records_it(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 3)
    first_alert = (await store.list_alerts(task_id=ids[0]))[0]
    await store.acknowledge_alert(first_alert.id, by="ben")  # acknowledged already

    outcome = await store.acknowledge_alerts_of(ids, by="anna")

    assert outcome.action is BulkAction.ACKNOWLEDGE
    assert (outcome.done, outcome.alerts) == ((ids[1], ids[2]), 2)
    assert outcome.refused == (Refusal(task_id=ids[0], reason="no open alert"),)
    assert await store.list_alerts(open_only=True) == []
    assert (await store.list_alerts(task_id=ids[0]))[0].acknowledged_by == "ben"
    (alert,) = await store.list_alerts(task_id=ids[1])
    assert alert.acknowledged_by == "anna"
    details = [e.detail for e in await store.task_events(ids[1]) if e.kind == "alert_acknowledged"]
    assert details == [{"alerts": [alert.id], "by": "anna", "bulk": outcome.bulk, "of": 3}]
    assert [e.kind for e in await store.task_events(ids[0])].count("alert_acknowledged") == 0


async def test_an_idempotency_key_acts_once_and_replays_its_outcome(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 2)
    key = IdempotencyKey(key="run-17", digest="d1")

    first = await store.retry_tasks(ids, by="anna", key=key)
    again = await store.retry_tasks(ids, by="anna", key=key)

    assert (first.done, first.replayed) == (tuple(ids), False)
    assert (again.done, again.bulk, again.replayed) == (first.done, first.bulk, True)
    stored = await store.bulk_reply("run-17")
    assert stored is not None
    assert (stored.action, stored.digest, stored.outcome.done) == (
        BulkAction.RETRY,
        "d1",
        tuple(ids),
    )
    for task_id in ids:  # retried once: one event each
        kinds = [e.kind for e in await store.task_events(task_id)]
        assert kinds.count("retried") == 1
    with pytest.raises(ConfigError, match="used for another request"):
        await store.retry_tasks(ids, by="anna", key=IdempotencyKey(key="run-17", digest="d2"))
    with pytest.raises(ConfigError, match="used for another request"):
        await store.acknowledge_alerts_of(ids, by="anna", key=key)
    assert await store.bulk_reply("never-used") is None


async def test_an_idempotency_key_goes_with_the_tombstones_kept_as_long(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 2)
    await store.retry_tasks(ids[:1], by="anna", key=IdempotencyKey(key="old", digest="d1"))
    fake_clock.advance(60)
    cut = store.now()
    fake_clock.advance(60)
    await store.retry_tasks(ids[1:], by="anna", key=IdempotencyKey(key="new", digest="d2"))

    await store.purge_tombstones(purged_before=cut, limit=10)

    assert await store.bulk_reply("old") is None
    assert await store.bulk_reply("new") is not None


async def test_a_key_sent_twice_at_once_acts_once(
    stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 3)
    other = await stores.connect()
    key = IdempotencyKey(key="twice", digest="d")

    outcomes = await asyncio.gather(
        store.acknowledge_alerts_of(ids, by="anna", key=key),
        other.acknowledge_alerts_of(ids, by="anna", key=key),
    )

    assert [o.done for o in outcomes] == [tuple(ids), tuple(ids)]
    assert sorted(o.replayed for o in outcomes) == [False, True]
    assert len({o.bulk for o in outcomes}) == 1
    for task_id in ids:
        kinds = [e.kind for e in await store.task_events(task_id)]
        assert kinds.count("alert_acknowledged") == 1


async def test_bad_input_is_refused_and_changes_nothing(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = await _in_error(store, fake_clock, 1)
    for task_ids, field in (
        ("one-id", "task_ids"),
        ([""], "task_ids"),
        (["a\x00b"], "task_ids"),
        ([f"t{i}" for i in range(10_001)], "task_ids"),
    ):
        with pytest.raises(ConfigError, match=field):
            await store.retry_tasks(task_ids, by="anna")
    with pytest.raises(ConfigError, match="by"):
        await store.acknowledge_alerts_of(ids, by=" ")
    with pytest.raises(ConfigError, match="Idempotency-Key"):
        await store.retry_tasks(ids, by="anna", key=IdempotencyKey(key="x" * 201, digest="d"))
    task = await store.get_task(ids[0])
    assert task is not None
    assert task.process_state is ProcessState.ERROR
    assert len(await store.list_alerts(open_only=True)) == 1


async def test_retry_many_puts_failed_steps_back_and_resumes_an_undo(store: Store) -> None:
    failed = await claimed_task(store, locked_by=_OWNER)
    await store.start_step(step_start(failed, seq=1, agent="a"))
    request = await taken_request(store, agent="a")
    assert await store.reply_and_ack(request, worker="w1", ok=False, body={"message": "no"})
    assert [ok for _, ok in await store.record_replies(locked_by=_OWNER, limit=10)] == [True]
    await store.fail_task(
        failed.id, locked_by=_OWNER, epoch=failed.lock_epoch, state=ProcessState.ERROR, error={}
    )
    cancelled = await claimed_task(store, locked_by=_OWNER)
    await store.cancel_task(cancelled.id, by="ben")
    (again,) = await store.claim_tasks(locked_by=_OWNER, limit=10)
    await store.fail_task(
        again.id, locked_by=_OWNER, epoch=again.lock_epoch, state=ProcessState.ERROR, error={}
    )

    outcome = await store.retry_tasks([failed.id, cancelled.id], by="anna")

    assert outcome.done == (failed.id, cancelled.id)
    states = {t.id: t for t in await store.claim_tasks(locked_by="s2", limit=10)}
    assert states[failed.id].process_state is ProcessState.PROCESSING
    assert [(s.seq, s.state) for s in states[failed.id].steps] == [(1, StepState.NOT_STARTED)]
    assert states[cancelled.id].process_state is ProcessState.COMPENSATING
    assert states[failed.id].lock_epoch == failed.lock_epoch + 2  # the retry's fence, the claim
