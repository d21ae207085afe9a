"""The PostgreSQL writer: one instant per batch, one transaction per Sync, clear refusals.

A batch asks the database for the time first and reads the answer only when a
handler needs the instant as a value (`PostgresBatch.clock`): by then it came back with
the handler's first read. Statements that take the transaction's `now()`
themselves (a submit's, a claim's) store exactly the instant a handler reads.
A batch whose statements run up to one Sync is still all or nothing, and a
failed batch's session is replaced (a deadlock's retry runs on a new one). A lone
submit without a key is one statement (`batch.ALONE`): it must write what the
batch writes, and a connection lost while it runs leaves its outcome unknown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
import pytest

from shepherd.errors import CommitUnknownError, ShepherdError, StoreUnavailableError
from shepherd.store.contract import NewTask
from shepherd.store.encoding import Encoding
from shepherd.store.ops import SubmitTask
from shepherd.store.postgres import PostgresStore
from shepherd.store.postgres import inserts as pg_inserts
from shepherd.store.postgres import tasks as pg_tasks
from shepherd.store.postgres import writer as pg_writer
from shepherd.store.postgres.batch import WRITES, Later, PostgresBatch
from shepherd.testing import wait_until
from support.postgres import OpenStore

pytestmark = pytest.mark.postgres


async def _rows(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()


async def _instants(url: str, task_id: str) -> set[datetime]:
    """Every instant the submit of `task_id` stored: its columns and its `received` event."""
    (row,) = await _rows(
        url, "SELECT created_at, updated_at, not_before FROM tasks WHERE id = %s", (task_id,)
    )
    events = await _rows(
        url, "SELECT at FROM events WHERE task_id = %s AND kind = 'received'", (task_id,)
    )
    return {*row, *(at for (at,) in events)}


async def test_a_lone_submit_stores_its_transactions_instant_everywhere(
    open_store: OpenStore, postgres_url: str
) -> None:
    store = await open_store()  # the system clock: the database's now() decides
    assert store.database_clock

    submitted = await store.submit_task(NewTask(workflow="wf", input=1))

    (instant,) = await _instants(postgres_url, submitted.task_id)
    assert abs((instant - store.now()).total_seconds()) < 60


async def test_a_submit_and_a_claim_in_one_batch_store_the_same_instant(
    open_store: OpenStore, postgres_url: str
) -> None:
    store = await open_store()
    waiting = await store.submit_task(NewTask(workflow="wf", input="first"))
    before = store.statistics()

    # Started in one turn of the loop: one batch; both take the instant in SQL.
    new, (claimed,) = await asyncio.gather(
        store.submit_task(NewTask(workflow="wf", input="second")),
        store.claim_tasks(locked_by="s1", limit=1),
    )

    assert store.statistics()["batches"] - before["batches"] == 1
    assert claimed.id == waiting.task_id
    ((claimed_at,),) = await _rows(
        postgres_url,
        "SELECT at FROM events WHERE task_id = %s AND kind = 'claimed'",
        (claimed.id,),
    )
    assert await _instants(postgres_url, new.task_id) == {claimed_at}


async def test_a_handler_reads_the_batchs_clock_with_its_first_read(postgres_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        async with conn.pipeline():
            clock = await conn.cursor().execute("SELECT now()")
            batch = PostgresBatch(conn, clock)
            assert batch.instant is None  # statements take now() themselves meanwhile
            with pytest.raises(ShepherdError, match=r"await PostgresBatch\.clock\(\) first"):
                _ = batch.now

            cursor = await batch.send("SELECT now(), 1")
            row = await cursor.fetchone()
            assert clock.pgresult is not None  # the clock's answer came back with it

            now = await batch.clock()
        assert row is not None
        assert now == row[0]
        assert batch.now == now
        assert batch.instant == now


async def test_an_outcome_read_after_the_commit_that_fails_fails_its_caller_alone(
    store: PostgresStore, postgres_url: str
) -> None:
    submit = WRITES[SubmitTask]

    async def broken() -> object:
        raise RuntimeError("the rows read after the commit were not there")

    async def later_for_bad(batch: PostgresBatch, ops: Sequence[SubmitTask]) -> list[object]:
        outcomes = await submit(batch, ops)
        return [
            Later(broken) if op.task.key == "bad" else o
            for op, o in zip(ops, outcomes, strict=True)
        ]

    WRITES[SubmitTask] = later_for_bad
    try:
        before = store.statistics()["batches"]
        both = await asyncio.gather(
            store.submit_task(NewTask(workflow="wf", input=1, key="good")),
            store.submit_task(NewTask(workflow="wf", input=2, key="bad")),
            return_exceptions=True,
        )
        good, bad = both
    finally:
        WRITES[SubmitTask] = submit

    assert store.statistics()["batches"] - before == 1  # one batch, committed once
    assert isinstance(bad, RuntimeError)
    assert not isinstance(good, BaseException)
    assert good.created
    rows = await _rows(postgres_url, "SELECT key FROM tasks ORDER BY key")
    assert rows == [("bad",), ("good",)]  # not run again one by one


async def test_a_statement_failing_late_in_a_batch_undoes_all_of_it_and_the_session_is_replaced(
    store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert = pg_inserts.insert

    async def insert_then_fail(batch: Any, *args: Any) -> Any:
        second = await insert(batch, *args)
        await batch.send("SELECT 1 / 0")  # refused by the server, after the insert ran
        return second

    writer_pid = store._writer.pid
    monkeypatch.setattr(pg_inserts, "insert", insert_then_fail)
    with pytest.raises(ShepherdError, match=r"refused a write \(22012\)"):
        # With a key: a batch (a lone submit without one is a single statement).
        await store.submit_task(NewTask(workflow="wf", input=1, key="k"))
    monkeypatch.undo()

    assert await _rows(postgres_url, "SELECT id FROM tasks") == []
    assert await _rows(postgres_url, "SELECT id FROM events") == []
    submitted = await store.submit_task(NewTask(workflow="wf", input=2))
    assert submitted.created
    assert store._writer.pid != writer_pid  # a failed transaction's session is not reused


#: A deadlock as the server reports it (40P01), which the writer retries.
DEADLOCK = "DO $$ BEGIN RAISE EXCEPTION 'deadlock (the test)' USING ERRCODE = '40P01'; END $$"


@pytest.mark.parametrize("earlier", [4, 5, 6])
async def test_a_deadlock_is_retried_also_in_the_batch_that_first_prepares_its_statements(
    store: PostgresStore, earlier: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # psycopg prepares a statement at its sixth run: after 5 earlier batches, the
    # failing one is the batch in which the statements are first prepared. The
    # session it failed on then took them for prepared when the server had none,
    # and the retry, and every write after it, failed with 26000.
    for n in range(earlier):
        await store.submit_task(NewTask(workflow="wf", input=n, key=f"before-{n}"))
    insert = pg_inserts.insert
    deadlocks = [DEADLOCK]

    async def insert_then_deadlock(batch: Any, *args: Any) -> Any:
        second = await insert(batch, *args)
        if deadlocks:
            await batch.send(deadlocks.pop())
        return second

    monkeypatch.setattr(pg_inserts, "insert", insert_then_deadlock)
    assert (await store.submit_task(NewTask(workflow="wf", input=1, key="k"))).created
    assert not deadlocks
    assert store._writer.retries == 1
    for n in range(8):
        assert (await store.submit_task(NewTask(workflow="wf", input=n, key=f"after-{n}"))).created


async def test_a_new_tasks_id_drawn_twice_is_refused_and_nothing_is_written(
    store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_tasks, "new_task_id", lambda: "0123456789abcdef0123")
    first = await store.submit_task(NewTask(workflow="wf", input=1))

    with pytest.raises(StoreUnavailableError, match="already taken; nothing was written"):
        await store.submit_task(NewTask(workflow="wf", input=2))

    assert await _rows(postgres_url, "SELECT id, input FROM tasks") == [(first.task_id, "1")]


_TASK_ROW = (
    "SELECT workflow, input, process_state, lock_epoch, complete_within, failure_count, "
    "reply_to, trace, not_before = created_at AND updated_at = created_at FROM tasks WHERE id = %s"
)
_EVENT_ROWS = "SELECT reply_to, kind, detail, at FROM events WHERE task_id = %s ORDER BY id"


async def test_a_lone_submit_without_a_key_writes_in_one_statement_what_a_batch_writes(
    store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = NewTask(
        workflow="wf", input={"n": [1, "two"]}, reply_to="r", complete_within=7, trace="t"
    )
    alone = await store.submit_task(task)

    def no_batch(*args: object, **kwargs: object) -> None:
        raise AssertionError("a batch was built")

    keyed = await store.submit_task(NewTask(**{**_fields(task), "key": "k"}))  # a batch
    monkeypatch.setattr(pg_writer, "PostgresBatch", no_batch)
    commits = store._writer.commits
    again = await store.submit_task(task)  # alone: no batch
    assert store._writer.commits == commits + 1

    rows = [
        (
            await _rows(postgres_url, _TASK_ROW, (t.task_id,)),
            await _rows(postgres_url, _EVENT_ROWS, (t.task_id,)),
        )
        for t in (alone, keyed, again)
    ]
    assert rows[0] == rows[1] == rows[2]
    ((task_row,), (event,)) = rows[0]
    assert task_row == ("wf", '{"n":[1,"two"]}', "pending", 0, 7.0, 0, "r", "t", True)
    assert event[:3] == ("r", "received", '{"workflow":"wf"}')


def _fields(task: NewTask) -> dict[str, Any]:
    return {name: getattr(task, name) for name in NewTask.__dataclass_fields__}


def test_a_submit_with_a_key_or_an_input_that_does_not_encode_needs_a_batch() -> None:
    encoding = Encoding(payload_limit=64)
    alone = pg_tasks.submit_alone

    assert alone(SubmitTask(task=NewTask(workflow="wf", input=1)), encoding, None) is not None
    assert alone(SubmitTask(task=NewTask(workflow="wf", input=1, key="k")), encoding, None) is None
    too_big = NewTask(workflow="wf", input="x" * 100)
    assert alone(SubmitTask(task=too_big), encoding, None) is None


async def test_a_lone_submit_cut_off_while_it_runs_is_reported_as_unknown(
    open_store: OpenStore, postgres_server: str, postgres_url: str
) -> None:
    store = await open_store()
    await store.submit_task(NewTask(workflow="wf", input=1))
    pid = store._writer.pid

    async def waits_for_the_lock() -> bool:
        found = await _rows(
            postgres_server,
            "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            (pid,),
        )
        return bool(found)

    async with await psycopg.AsyncConnection.connect(postgres_url) as blocker:
        await blocker.execute("LOCK TABLE tasks IN EXCLUSIVE MODE")
        cut_off = asyncio.create_task(store.submit_task(NewTask(workflow="wf", input=2)))
        await wait_until(waits_for_the_lock, timeout=10.0)
        await _rows(postgres_server, "SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(CommitUnknownError, match="the outcome is unknown"):
            await cut_off
        await blocker.rollback()

    # Here it had not committed; the writer reconnects for the next write.
    assert await _rows(postgres_url, "SELECT input FROM tasks ORDER BY input") == [("1",)]
    third = await store.submit_task(NewTask(workflow="wf", input=3))
    assert third.created
    assert store._writer.pid != pid


#: The deadline of the writers below, far shorter than the server's answer.
SHORT_TIMEOUT = 0.5
SLOW = "SELECT pg_sleep(30)"


@pytest.mark.parametrize("read_before_commit", [True, False])
async def test_a_batch_past_store_timeout_fails_once_and_its_session_is_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, read_before_commit: bool
) -> None:
    # The server answers too late: with the slow statement read before the commit
    # is asked for, the batch certainly did not commit; sent and left for the
    # commit to bring back, its deadline passes while the batch is committing.
    store = PostgresStore(postgres_url, store_timeout=SHORT_TIMEOUT)
    await store.open()
    try:
        insert = pg_inserts.insert

        async def insert_then_wait(batch: Any, *args: Any) -> Any:
            second = await insert(batch, *args)  # its statements sent (`phases`)

            async def then_wait() -> list[object]:
                outcomes = await second()  # its rows read
                slow = await batch.send(SLOW)
                if read_before_commit:
                    await slow.fetchone()
                return outcomes

            return then_wait

        pid = store._writer.pid
        monkeypatch.setattr(pg_inserts, "insert", insert_then_wait)
        expected = StoreUnavailableError if read_before_commit else CommitUnknownError
        with pytest.raises(expected) as caught:
            # With a key: a batch (a lone submit without one is a single statement).
            await asyncio.wait_for(
                store.submit_task(NewTask(workflow="wf", input=1, key="k")), timeout=60
            )
        monkeypatch.undo()
        assert type(caught.value) is expected
        assert f"within store_timeout ({SHORT_TIMEOUT:g} s)" in caught.value.message
        if read_before_commit:
            assert "nothing was written" in caught.value.message
        else:
            assert "the outcome is unknown" in caught.value.message
        stats = store.statistics()
        assert (stats["writer_timeouts"], stats["batch_retries"]) == (1, 0)  # not run again
        assert (await store.submit_task(NewTask(workflow="wf", input=2))).created
        assert store._writer.pid != pid
    finally:
        await store.close()
    # The server ended the cut-off transaction without committing it.
    assert await _rows(postgres_url, "SELECT input FROM tasks ORDER BY input") == [("2",)]
