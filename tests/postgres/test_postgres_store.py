"""The PostgreSQL store against the store contract, plus what only PostgreSQL has.

Each test gets a fresh clone of the migrated template database. Tests that move
time use a FakeClock, which replaces the database's clock; the others run on
the database's clock, as production does.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from shepherd.core.records import Event, Task
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.core.supervision import Compensate, Escalate, Reset
from shepherd.errors import (
    InvalidStateError,
    PayloadError,
    StaleEpochError,
    StoreUnavailableError,
    UnknownTaskError,
)
from shepherd.store import open_store as open_store_url
from shepherd.store import signals as ch
from shepherd.store.contract import REPLY_GRACE, NewTask, StepStart
from shepherd.store.postgres import PostgresStore
from shepherd.testing import FakeClock, wait_until
from support.postgres import MakePostgresUrl, OpenStore

pytestmark = pytest.mark.postgres

WAKE_DEADLINE = 10.0


async def submit(store: PostgresStore, data: object = None, **kw: object) -> str:
    return (await store.submit_task(NewTask(workflow="wf", input=data, **kw))).task_id  # type: ignore[arg-type]


async def claim_one(store: PostgresStore, owner: str = "s1") -> Task:
    await submit(store, {"n": 1})
    (task,) = await store.claim_tasks(locked_by=owner, limit=1)
    return task


def step(
    task: Task, *, owner: str = "s1", seq: int = 0, attempt: int = 1, **kw: object
) -> StepStart:
    return StepStart(
        task_id=task.id,
        locked_by=owner,
        epoch=task.lock_epoch,
        seq=seq,
        agent=str(kw.pop("agent", "charge")),
        payload=kw.pop("payload", {"amount": 5}),
        within=float(kw.pop("within", 10.0)),  # type: ignore[arg-type]
        attempt=attempt,
        **kw,  # type: ignore[arg-type]
    )


async def kinds(store: PostgresStore, task_id: str) -> list[str]:
    return [e.kind for e in await store.task_events(task_id)]


async def admin_rows(
    url: str, query: str, params: tuple[object, ...] = ()
) -> list[tuple[object, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall() if cursor.description else []


# -- opening -----------------------------------------------------------------


async def test_unreachable_server_is_one_line_without_the_password() -> None:
    store = PostgresStore("postgresql://alice:s3cret-pw@127.0.0.1:1/nowhere", connect_timeout=2)
    with pytest.raises(StoreUnavailableError) as caught:
        await store.open()
    message = str(caught.value)
    assert "s3cret-pw" not in message
    assert "\n" not in message
    assert "127.0.0.1:1/nowhere" in message


async def test_open_store_picks_postgres_by_scheme(postgres_url: str) -> None:
    store = open_store_url(postgres_url)
    assert isinstance(store, PostgresStore)
    await store.open()
    await store.close()


async def test_concurrent_opens_apply_each_migration_once(
    make_postgres_url: MakePostgresUrl,
) -> None:
    url = make_postgres_url(empty=True)
    stores = [PostgresStore(url, min_connections=1) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        rows = await admin_rows(
            url, "SELECT version, count(*) FROM schema_migrations GROUP BY version"
        )
        assert rows
        assert all(count == 1 for _, count in rows)
        assert await stores[0].count_tasks() == {}
    finally:
        await asyncio.gather(*(s.close() for s in stores))


# -- submit ------------------------------------------------------------------


async def test_submit_is_idempotent_per_key(store: PostgresStore) -> None:
    first = await store.submit_task(NewTask(workflow="wf", input={"a": 1}, key="order-1"))
    again = await store.submit_task(NewTask(workflow="wf", input={"a": 2}, key="order-1"))
    other = await store.submit_task(NewTask(workflow="other", input={"a": 3}, key="order-1"))
    assert first.created
    assert not again.created
    assert other.created
    assert again.task_id == first.task_id != other.task_id
    task = await store.get_task(first.task_id)
    assert task is not None
    assert task.input == {"a": 1}
    assert await kinds(store, first.task_id) == ["received"]


async def test_same_key_in_one_batch_creates_one_task(store: PostgresStore) -> None:
    outcomes = await asyncio.gather(
        *(store.submit_task(NewTask(workflow="wf", input=i, key="k")) for i in range(5))
    )
    assert len({o.task_id for o in outcomes}) == 1
    assert [o.created for o in outcomes] == [True, False, False, False, False]
    assert store.statistics()["commits"] == 1
    assert await store.count_tasks() == {ProcessState.PENDING: 1}


async def test_submit_refuses_nul_and_changes_nothing(store: PostgresStore) -> None:
    with pytest.raises(PayloadError, match="NUL"):
        await submit(store, {"text": "a\u0000b"})
    assert await store.count_tasks() == {}


async def test_one_bad_operation_fails_only_its_caller(store: PostgresStore) -> None:
    both = await asyncio.gather(
        store.submit_task(NewTask(workflow="wf", input=1)),
        store.submit_task(NewTask(workflow="w\x00f", input=2)),  # PostgreSQL text refuses NUL
        return_exceptions=True,
    )
    good, bad = both
    assert not isinstance(good, BaseException)
    assert good.created
    assert isinstance(bad, Exception)
    assert await store.count_tasks() == {ProcessState.PENDING: 1}


# -- claims ------------------------------------------------------------------


async def test_claim_takes_pending_tasks_and_bumps_the_epoch(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    task_id = await submit(store, complete_within=30.0)
    (task,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert task.id == task_id
    assert task.process_state is ProcessState.PROCESSING
    assert (task.locked_by, task.lock_epoch, task.steps) == ("s1", 1, ())
    assert task.complete_by == fake_clock.now() + timedelta(seconds=30)
    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    events = await store.task_events(task_id)
    assert events[-1].kind == "claimed"
    assert events[-1].detail == {"owner": "s1", "lock_epoch": 1}


async def test_claim_returns_recorded_steps_on_a_reclaim(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    assert await store.release_tasks([task.id], locked_by="s1") == 1
    (again,) = await store.claim_tasks(locked_by="s2", limit=1)
    assert again.lock_epoch == 3  # bumped by the release, then by the claim
    assert [(s.seq, s.state, s.request) for s in again.steps] == [
        (0, StepState.RUNNING, {"amount": 5})
    ]


async def test_claim_skips_rows_locked_by_another_transaction(
    store: PostgresStore, postgres_url: str
) -> None:
    locked = await submit(store, 1)
    free = await submit(store, 2)
    async with await psycopg.AsyncConnection.connect(postgres_url) as other:
        await other.execute("SELECT id FROM tasks WHERE id = %s FOR UPDATE", (locked,))
        # SKIP LOCKED: no wait for the other transaction, and no double claim.
        claimed = await asyncio.wait_for(store.claim_tasks(locked_by="s1", limit=10), 5)
        assert [t.id for t in claimed] == [free]
        await other.rollback()
    assert [t.id for t in await store.claim_tasks(locked_by="s1", limit=10)] == [locked]


async def test_concurrent_claimers_never_share_a_task(open_store: OpenStore) -> None:
    stores = [await open_store() for _ in range(3)]
    await asyncio.gather(*(submit(stores[0], i) for i in range(300)))
    got: dict[str, list[str]] = {f"s{i}": [] for i in range(len(stores))}

    async def claimer(store: PostgresStore, owner: str) -> None:
        while claimed := await store.claim_tasks(locked_by=owner, limit=7):
            got[owner].extend(t.id for t in claimed)

    await asyncio.gather(*(claimer(s, f"s{i}") for i, s in enumerate(stores)))
    every = [task_id for ids in got.values() for task_id in ids]
    assert len(every) == len(set(every)) == 300
    owners = await admin_rows(
        stores[0].url, "SELECT count(*) FROM tasks WHERE lock_epoch = 1 AND locked_by IS NOT NULL"
    )
    assert owners == [(300,)]


async def test_not_before_holds_a_task_back(store: PostgresStore, fake_clock: FakeClock) -> None:
    task = await claim_one(store)
    reset = Reset(
        failure_count=1,
        not_before=fake_clock.now() + timedelta(seconds=5),
        process_state=ProcessState.PENDING,
        reason="expired",
    )
    lease = await store.acquire_lease("supervisor", holder="v", ttl=10)
    assert lease is not None
    assert await store.apply_supervision(task, reset, leader=lease)
    assert await store.claim_tasks(locked_by="s2", limit=1) == []
    fake_clock.advance(5)
    (again,) = await store.claim_tasks(locked_by="s2", limit=1)
    assert (again.id, again.failure_count, again.lock_epoch) == (task.id, 1, 3)


# -- steps, fencing, replies ---------------------------------------------------


async def test_start_step_writes_the_step_and_its_request(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    task = await claim_one(store)
    complete_by = await store.start_step(step(task, within=7.0))
    assert complete_by == fake_clock.now() + timedelta(seconds=7)
    (request,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    assert (request.task_id, request.seq, request.attempt, request.lock_epoch) == (task.id, 0, 1, 1)
    assert (request.payload, request.kind, request.complete_by) == (
        {"amount": 5},
        StepKind.FORWARD,
        complete_by,
    )
    current = await store.get_task(task.id)
    assert current is not None
    assert current.complete_by == complete_by + timedelta(seconds=REPLY_GRACE)
    assert current.steps[0].state is StepState.RUNNING


async def test_stale_epoch_raises_and_changes_nothing(store: PostgresStore) -> None:
    task = await claim_one(store)
    assert await store.release_tasks([task.id], locked_by="s1") == 1
    (fresh,) = await store.claim_tasks(locked_by="s2", limit=1)
    before = await store.get_task(task.id)
    for write in (
        store.start_step(step(task)),
        store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=1),
        store.fail_task(
            task.id, locked_by="s1", epoch=task.lock_epoch, state=ProcessState.ERROR, error="x"
        ),
        store.start_compensation(task.id, locked_by="s1", epoch=task.lock_epoch, error="x"),
        # The right epoch but the wrong owner is fenced off too.
        store.finish_task(task.id, locked_by="s1", epoch=fresh.lock_epoch, result=1),
    ):
        with pytest.raises(StaleEpochError) as caught:
            await write
        assert caught.value.task_id == task.id
    assert await store.get_task(task.id) == before
    assert await store.take_requests(agents=["charge"], worker="w", limit=10) == []


async def test_stale_and_fresh_writes_in_one_batch(store: PostgresStore) -> None:
    stale = await claim_one(store)
    assert await store.release_tasks([stale.id], locked_by="s1") == 1
    (fresh,) = await store.claim_tasks(locked_by="s2", limit=1)
    outcomes = await asyncio.gather(
        store.finish_task(stale.id, locked_by="s1", epoch=stale.lock_epoch, result="zombie"),
        store.finish_task(fresh.id, locked_by="s2", epoch=fresh.lock_epoch, result="owner"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], StaleEpochError)
    assert outcomes[1] is None
    done = await store.get_task(fresh.id)
    assert done is not None
    assert (done.process_state, done.result) == (
        ProcessState.PROCESSED,
        "owner",
    )


async def test_reply_is_recorded_once_for_the_current_attempt(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    (request,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"paid": True})
    ((reply, recorded),) = await store.record_replies(locked_by="s1", limit=10)
    assert recorded
    assert reply.body == {"paid": True}
    assert reply.ok
    assert await store.record_replies(locked_by="s1", limit=10) == []
    current = await store.get_task(task.id)
    assert current is not None
    assert (current.steps[0].state, current.steps[0].result) == (
        StepState.COMPLETED,
        {"paid": True},
    )
    assert (await store.task_events(task.id))[-1].detail == {
        "seq": 0,
        "agent": "charge",
        "attempt": 1,
    }


async def test_failed_reply_marks_the_step_failed(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    (request,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    assert await store.reply_and_ack(request, worker="w1", ok=False, body={"type": "Declined"})
    ((_, recorded),) = await store.record_replies(locked_by="s1", limit=10)
    assert recorded
    current = await store.get_task(task.id)
    assert current is not None
    assert current.steps[0].state is StepState.FAILED
    last = (await store.task_events(task.id))[-1]
    assert (last.kind, last.detail["error"]) == ("step_failed", {"type": "Declined"})


async def test_record_replies_discards_stale_replies(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task, attempt=1))
    (old,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    assert await store.reply_and_ack(old, worker="w1", ok=True, body="late")
    await store.start_step(step(task, attempt=2))  # the step was resent meanwhile
    ((reply, recorded),) = await store.record_replies(locked_by="s1", limit=10)
    assert (reply.attempt, recorded) == (1, False)
    current = await store.get_task(task.id)
    assert current is not None
    assert (current.steps[0].state, current.steps[0].attempt) == (StepState.RUNNING, 2)
    assert "step_completed" not in await kinds(store, task.id)


async def test_reply_to_a_superseded_request_is_refused(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task, attempt=1))
    (old,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    await store.start_step(step(task, attempt=2))
    assert not await store.reply_and_ack(old, worker="w1", ok=True, body=1)
    (new,) = await store.take_requests(agents=["charge"], worker="w2", limit=10)
    assert new.attempt == 2
    assert not await store.reply_and_ack(new, worker="w1", ok=True, body=1)  # not its lease
    assert await store.reply_and_ack(new, worker="w2", ok=True, body=2)


async def test_reply_after_complete_by_is_refused(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    task = await claim_one(store)
    await store.start_step(step(task, within=2.0))
    (request,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    fake_clock.advance(2)
    assert not await store.reply_and_ack(request, worker="w1", ok=True, body=1)


async def test_taken_request_is_invisible_until_complete_by(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    task = await claim_one(store)
    await store.start_step(step(task, within=2.0))
    assert len(await store.take_requests(agents=["charge"], worker="w1", limit=10)) == 1
    assert await store.take_requests(agents=["charge"], worker="w2", limit=10) == []
    assert await store.take_requests(agents=["other"], worker="w2", limit=10) == []


async def test_unencodable_reply_becomes_a_payload_failure(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    (request,) = await store.take_requests(agents=["charge"], worker="w1", limit=10)
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={1, 2})
    ((reply, _),) = await store.record_replies(locked_by="s1", limit=10)
    assert not reply.ok
    assert reply.body["type"] == "PayloadError"


# -- task ends -------------------------------------------------------------------


async def test_finish_and_fail_end_the_task_and_say_so(store: PostgresStore) -> None:
    done = await claim_one(store)
    waiting = store.signals.event(ch.task_channel(done.id))
    await store.finish_task(done.id, locked_by="s1", epoch=done.lock_epoch, result={"ok": 1})
    assert waiting.is_set()
    failed = await claim_one(store)
    await store.start_step(step(failed))
    await store.fail_task(
        failed.id,
        locked_by="s1",
        epoch=failed.lock_epoch,
        state=ProcessState.ERROR,
        error={"why": "x"},
    )
    assert await store.take_requests(agents=["charge"], worker="w", limit=10) == []
    ended = await store.get_task(failed.id)
    assert ended is not None
    assert (ended.process_state, ended.error, ended.locked_by) == (
        ProcessState.ERROR,
        {"why": "x"},
        None,
    )
    assert (await store.task_events(done.id))[-1].detail == {"result": {"ok": 1}}
    assert (await store.task_events(failed.id))[-1].detail == {"error": {"why": "x"}}


async def test_start_compensation_keeps_the_claim(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_compensation(task.id, locked_by="s1", epoch=task.lock_epoch, error={"e": 1})
    current = await store.get_task(task.id)
    assert current is not None
    assert (current.process_state, current.locked_by) == (ProcessState.COMPENSATING, "s1")
    await store.fail_task(
        task.id,
        locked_by="s1",
        epoch=task.lock_epoch,
        state=ProcessState.COMPENSATED,
        error={"e": 1},
    )
    assert (await kinds(store, task.id))[-2:] == ["compensating", "compensated"]


# -- leases and supervision --------------------------------------------------------


async def test_leases_have_one_holder_and_a_new_epoch_per_holder(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    first = await store.acquire_lease("supervisor", holder="a", ttl=5)
    assert first is not None
    assert (first.holder, first.epoch) == ("a", 1)
    assert await store.acquire_lease("supervisor", holder="b", ttl=5) is None
    fake_clock.advance(3)
    renewed = await store.acquire_lease("supervisor", holder="a", ttl=5)
    assert renewed is not None
    assert renewed.epoch == 1
    assert renewed.expires_at == fake_clock.now() + timedelta(seconds=5)
    fake_clock.advance(5)
    taken = await store.acquire_lease("supervisor", holder="b", ttl=5)
    assert taken is not None
    assert (taken.holder, taken.epoch) == ("b", 2)
    await store.release_lease("supervisor", holder="b")
    after = await store.acquire_lease("supervisor", holder="a", ttl=5)
    assert after is not None
    assert (after.holder, after.epoch) == ("a", 3)


async def test_expired_claims_follow_the_clock(store: PostgresStore, fake_clock: FakeClock) -> None:
    task = await claim_one(store)
    assert await store.expired_claims(limit=10) == []
    fake_clock.advance(31)
    assert [t.id for t in await store.expired_claims(limit=10)] == [task.id]


async def test_supervision_is_fenced_by_leadership_and_epoch(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    old = await store.acquire_lease("supervisor", holder="v1", ttl=5)
    assert old is not None
    fake_clock.advance(31)
    new = await store.acquire_lease("supervisor", holder="v2", ttl=5)
    assert new is not None
    assert new.epoch == 2
    (expired,) = await store.expired_claims(limit=10)
    before = await store.get_task(task.id)
    reset = Reset(
        failure_count=1, not_before=fake_clock.now(), process_state=ProcessState.PENDING, reason="r"
    )
    assert not await store.apply_supervision(expired, reset, leader=old)  # deposed
    assert await store.get_task(task.id) == before
    assert await store.apply_supervision(expired, reset, leader=new)
    assert not await store.apply_supervision(expired, reset, leader=new)  # epoch moved on
    current = await store.get_task(task.id)
    assert current is not None
    assert (
        current.process_state,
        current.locked_by,
        current.lock_epoch,
        current.failure_count,
    ) == (
        ProcessState.PENDING,
        None,
        2,
        1,
    )
    assert await store.take_requests(agents=["charge"], worker="w", limit=10) == []
    last = (await store.task_events(task.id))[-1]
    assert (last.kind, last.detail) == ("reset", {"reason": "r", "failure_count": 1})


async def test_escalate_and_compensate_decisions(
    store: PostgresStore, fake_clock: FakeClock
) -> None:
    first = await claim_one(store)
    second = await claim_one(store)
    lease = await store.acquire_lease("supervisor", holder="v", ttl=100)
    assert lease is not None
    fake_clock.advance(31)
    waiting = store.signals.event(ch.task_channel(first.id))
    assert await store.apply_supervision(
        first, Escalate(failure_count=3, reason="gave up"), leader=lease
    )
    assert waiting.is_set()
    assert await store.apply_supervision(
        second, Compensate(failure_count=0, reason="undo"), leader=lease
    )
    escalated, compensating = await store.get_task(first.id), await store.get_task(second.id)
    assert escalated is not None
    assert compensating is not None
    assert (escalated.process_state, escalated.error, escalated.failure_count) == (
        ProcessState.ERROR,
        {"reason": "gave up"},
        3,
    )
    assert (compensating.process_state, compensating.locked_by) == (ProcessState.COMPENSATING, None)
    (reclaimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert (reclaimed.id, reclaimed.process_state) == (second.id, ProcessState.COMPENSATING)


# -- operator ------------------------------------------------------------------


async def _errored(store: PostgresStore) -> Task:
    task = await claim_one(store)
    await store.start_step(step(task))
    (request,) = await store.take_requests(agents=["charge"], worker="w", limit=1)
    await store.reply_and_ack(request, worker="w", ok=False, body="declined")
    await store.record_replies(locked_by="s1", limit=10)
    await store.fail_task(
        task.id, locked_by="s1", epoch=task.lock_epoch, state=ProcessState.ERROR, error="x"
    )
    return task


async def test_retry_puts_an_error_task_back_from_its_failed_step(store: PostgresStore) -> None:
    task = await _errored(store)
    retried = await store.retry_task(task.id)
    assert (retried.process_state, retried.locked_by, retried.error) == (
        ProcessState.PENDING,
        None,
        None,
    )
    assert retried.lock_epoch == task.lock_epoch + 1
    (again,) = await store.claim_tasks(locked_by="s2", limit=1)
    assert again.steps[0].state is StepState.NOT_STARTED
    last = (await store.task_events(task.id))[-2]
    assert (last.kind, last.detail) == ("retried", {"seq": None, "state": "pending"})


async def test_resubmit_a_step_with_a_new_payload(store: PostgresStore) -> None:
    task = await _errored(store)
    await store.retry_task(task.id, seq=0, payload={"amount": 4})
    (again,) = await store.claim_tasks(locked_by="s2", limit=1)
    assert (again.steps[0].state, again.steps[0].request) == (StepState.NOT_STARTED, {"amount": 4})
    with pytest.raises(InvalidStateError):
        await store.retry_task(task.id)  # it is no longer in error


async def test_operator_errors(store: PostgresStore) -> None:
    with pytest.raises(UnknownTaskError):
        await store.retry_task("nope")
    with pytest.raises(UnknownTaskError):
        await store.cancel_task("nope")
    task = await _errored(store)
    with pytest.raises(InvalidStateError, match="step 7 missing"):
        await store.retry_task(task.id, seq=7)
    done = await claim_one(store)
    await store.finish_task(done.id, locked_by="s1", epoch=done.lock_epoch, result=None)
    with pytest.raises(InvalidStateError, match="processed"):
        await store.cancel_task(done.id)


async def test_cancel_fences_the_owner_and_asks_for_compensation(store: PostgresStore) -> None:
    task = await claim_one(store)
    await store.start_step(step(task))
    cancelled = await store.cancel_task(task.id)
    assert (cancelled.process_state, cancelled.cancel_requested, cancelled.locked_by) == (
        ProcessState.COMPENSATING,
        True,
        None,
    )
    with pytest.raises(StaleEpochError):
        await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=1)
    assert await store.take_requests(agents=["charge"], worker="w", limit=10) == []
    assert (await kinds(store, task.id))[-1] == "cancel_requested"


# -- events --------------------------------------------------------------------


async def test_read_events_by_reply_to_and_cursor(store: PostgresStore) -> None:
    mine = await submit(store, 1, reply_to="app-1")
    await submit(store, 2, reply_to="app-2")
    (claimed,) = [t for t in await store.claim_tasks(locked_by="s1", limit=10) if t.id == mine]
    await store.finish_task(mine, locked_by="s1", epoch=claimed.lock_epoch, result="r")
    events: list[Event] = []

    async def delivered() -> bool:  # final once older transactions in the cluster end
        events[:] = await store.read_events(reply_to="app-1", after_id=0)
        return len(events) >= 3

    await wait_until(delivered, timeout=30)
    assert [e.kind for e in events] == ["received", "claimed", "processed"]
    assert all(e.task_id == mine for e in events)
    later = await store.read_events(reply_to="app-1", after_id=events[0].id)
    assert later == events[1:]
    every = await store.read_events(reply_to=None, after_id=0, limit=2)
    assert [e.id for e in every] == sorted(e.id for e in every)
    assert len(every) == 2


async def test_group_commit_runs_many_operations_in_few_transactions(store: PostgresStore) -> None:
    await asyncio.gather(*(submit(store, i) for i in range(100)))
    stats = store.statistics()
    assert stats["operations"] == 100
    assert stats["commits"] < 10


# -- the database's clock ----------------------------------------------------------


async def test_deadlines_use_the_database_clock(open_store: OpenStore) -> None:
    store = await open_store()  # the system clock: the database's now() decides
    assert store.database_clock
    task_id = await submit(store, complete_within=0.05)
    (task,) = await store.claim_tasks(locked_by="s1", limit=1)
    assert task.complete_by is not None
    assert abs((store.now() - task.complete_by).total_seconds()) < 5
    await wait_until(
        lambda: _expired_ids(store, task_id), timeout=WAKE_DEADLINE, message="claim never expired"
    )


async def _expired_ids(store: PostgresStore, task_id: str) -> bool:
    return task_id in [t.id for t in await store.expired_claims(limit=10)]


# -- LISTEN/NOTIFY -----------------------------------------------------------------


async def test_a_store_listens_to_the_channels_its_process_waits_on(
    open_store: OpenStore,
) -> None:
    writer, reader = await open_store(), await open_store()
    assert reader.listener.listening == frozenset()  # nothing waited on yet: nothing heard
    first = await submit(writer, 1)
    await reader.listen([ch.task_channel(first)])  # as a result's waiter does
    assert reader.listener.listening == {"shepherd_task"}
    # A result's waiter hears the ends of tasks, not the work of a worker elsewhere.
    heard = reader.statistics()["notifications"]
    (task,) = await writer.claim_tasks(locked_by="s1", limit=1)
    ended = reader.signals.event(ch.task_channel(first))
    await writer.finish_task(first, locked_by="s1", epoch=task.lock_epoch, result=1)
    await asyncio.wait_for(ended.wait(), WAKE_DEADLINE)
    assert reader.statistics()["notifications"] == heard + 1
    # Any other wait adds its channel as it begins.
    reader.signals.event(ch.TASKS)
    await wait_until(
        lambda: reader.listener.listening == {"shepherd_task", "shepherd_tasks"},
        timeout=WAKE_DEADLINE,
    )
    rung = reader.signals.event(ch.TASKS)
    await submit(writer, 2)
    await asyncio.wait_for(rung.wait(), WAKE_DEADLINE)


async def test_a_commit_wakes_another_store_through_notify(open_store: OpenStore) -> None:
    writer, reader = await open_store(), await open_store()
    await reader.listen([ch.TASKS, ch.EVENTS, ch.task_channel("t")])
    tasks_rung = reader.signals.event(ch.TASKS)
    events_rung = reader.signals.event(ch.EVENTS)
    task_id = await submit(writer, 1)
    await asyncio.wait_for(tasks_rung.wait(), WAKE_DEADLINE)
    await asyncio.wait_for(events_rung.wait(), WAKE_DEADLINE)
    (task,) = await writer.claim_tasks(locked_by="s1", limit=1)
    ended = reader.signals.event(ch.task_channel(task_id))
    await writer.finish_task(task_id, locked_by="s1", epoch=task.lock_epoch, result=1)
    await asyncio.wait_for(ended.wait(), WAKE_DEADLINE)
    assert reader.statistics()["notifications"] >= 3


async def test_work_notified_while_the_listener_was_down_is_still_found(
    open_store: OpenStore, postgres_server: str, postgres_url: str
) -> None:
    writer, reader = await open_store(), await open_store()
    reader.listener.retry_max = 0.1
    await reader.listen([ch.TASKS])
    pid = reader.listener.backend_pid
    assert pid is not None
    rung = reader.signals.event(ch.TASKS)
    dbname = postgres_url.rsplit("/", 1)[1]
    # Keep the listener out (connections already open stay) and cut it off.
    await admin_rows(postgres_server, f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
    await admin_rows(postgres_server, "SELECT pg_terminate_backend(%s)", (pid,))
    await wait_until(lambda: not reader.listener.connected, timeout=WAKE_DEADLINE)
    task_id = await submit(writer, 1)  # its NOTIFY reaches no one
    assert not rung.is_set()
    await admin_rows(postgres_server, f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
    await asyncio.wait_for(rung.wait(), WAKE_DEADLINE)  # ring_all after the reconnect
    assert reader.listener.reconnects == 1
    assert reader.listener.connected
    assert [t.id for t in await reader.claim_tasks(locked_by="s2", limit=10)] == [task_id]
    # And the new connection hears the next commit.
    again = reader.signals.event(ch.TASKS)
    await submit(writer, 2)
    await asyncio.wait_for(again.wait(), WAKE_DEADLINE)


async def test_the_store_survives_its_connections_being_cut(
    open_store: OpenStore, postgres_server: str, postgres_url: str
) -> None:
    store = await open_store()
    first = await submit(store, 1)
    dbname = postgres_url.rsplit("/", 1)[1]
    cut = await admin_rows(
        postgres_server,
        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = %s AND pid <> pg_backend_pid()",
        (dbname,),
    )
    assert cut

    async def ended() -> bool:
        left = await admin_rows(
            postgres_server,
            "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)",
            ([pid for pid, _ in cut],),
        )
        return not left

    # Once the sessions have ended, the writer finds its own gone before it
    # sends (a lone submit is one statement: cut off in flight, its outcome
    # would be unknown).
    await wait_until(ended, timeout=WAKE_DEADLINE)
    second = await submit(store, 2)  # the writer reconnects first
    assert await store.get_task(first) is not None  # the pool replaces its connections
    assert {t.id for t in await store.claim_tasks(locked_by="s1", limit=10)} == {first, second}
    await wait_until(lambda: store.listener.reconnects == 1, timeout=WAKE_DEADLINE)


async def test_a_deadlock_victim_batch_is_retried_unseen(store: PostgresStore) -> None:
    from shepherd.store.ops import SubmitTask
    from shepherd.store.postgres import handlers

    real = handlers.WRITES[SubmitTask]
    failures = [psycopg.errors.DeadlockDetected("deadlock detected")]

    async def deadlocking(batch: Any, ops: Any) -> list[object]:
        if failures:
            raise failures.pop()
        return await real(batch, ops)

    handlers.WRITES[SubmitTask] = deadlocking
    try:
        outcomes = await asyncio.gather(*(submit(store, i) for i in range(3)))
    finally:
        handlers.WRITES[SubmitTask] = real
    assert len(set(outcomes)) == 3
    assert store.statistics()["batch_retries"] == 1
    assert await store.count_tasks() == {ProcessState.PENDING: 3}


async def test_an_unparsable_url_is_refused_without_its_password() -> None:
    with pytest.raises(StoreUnavailableError) as caught:
        PostgresStore("postgresql://alice:hunter2@[broken")
    assert "hunter2" not in str(caught.value)


async def test_concurrent_workers_never_take_one_request_twice(open_store: OpenStore) -> None:
    stores = [await open_store() for _ in range(3)]
    owner = stores[0]
    for i in range(60):
        await submit(owner, i)
    claimed = await owner.claim_tasks(locked_by="s1", limit=100)
    await asyncio.gather(*(owner.start_step(step(t)) for t in claimed))
    taken: list[int] = []

    async def worker(store: PostgresStore, name: str) -> None:
        while batch := await store.take_requests(agents=["charge"], worker=name, limit=4):
            taken.extend(r.id for r in batch)

    await asyncio.gather(*(worker(s, f"w{i}") for i, s in enumerate(stores)))
    assert len(taken) == len(set(taken)) == 60


async def test_fencing_is_checked_before_the_payload(store: PostgresStore) -> None:
    task = await claim_one(store)
    with pytest.raises(PayloadError):
        await store.start_step(step(task, payload={"bad": float("nan")}))
    assert await store.take_requests(agents=["charge"], worker="w", limit=10) == []
    assert await store.release_tasks([task.id], locked_by="s1") == 1
    with pytest.raises(StaleEpochError):
        await store.start_step(step(task, payload={"bad": float("nan")}))
    with pytest.raises(StaleEpochError):
        await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result={1})


async def test_one_step_started_twice_in_a_batch_is_applied_in_order(store: PostgresStore) -> None:
    task = await claim_one(store)
    first, second = await asyncio.gather(
        store.start_step(step(task, attempt=1, payload="a")),
        store.start_step(step(task, attempt=2, payload="b")),
    )
    assert first <= second
    current = await store.get_task(task.id)
    assert current is not None
    assert (current.steps[0].attempt, current.steps[0].request) == (2, "b")
    taken = await store.take_requests(agents=["charge"], worker="w", limit=10)
    assert [r.attempt for r in taken] == [1, 2]
