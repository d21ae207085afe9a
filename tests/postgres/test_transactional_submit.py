"""Transactional submit: the task is written in the caller's own PostgreSQL transaction."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from shepherd import App, Submission
from shepherd.agents import AgentRequest
from shepherd.core.records import Event, JsonValue
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, PayloadError
from shepherd.scheduler import WorkflowContext
from shepherd.store.contract import NewTask
from shepherd.store.postgres import PostgresStore
from shepherd.testing import wait_until
from support.postgres import MakePostgresUrl, OpenStore

Conn = psycopg.AsyncConnection[tuple[object, ...]]


def echo_app(url: str) -> App:
    """A one-step workflow: the order is confirmed by one agent."""
    app = App(url, alerts=())

    @app.agent("orders.confirm")
    async def confirm(request: AgentRequest) -> JsonValue:
        return {"confirmed": request.payload}

    @app.workflow("confirm")
    async def confirm_order(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return await ctx.call("orders.confirm", data)

    return app


@pytest.fixture
async def business(postgres_url: str) -> str:
    """The test database with the application's own table, `orders`."""
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    return postgres_url


async def connect(url: str) -> Conn:
    return await psycopg.AsyncConnection.connect(url)


async def orders(url: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT id FROM orders ORDER BY id")
        return [str(row[0]) for row in await cursor.fetchall()]


@pytest.mark.postgres
async def test_commit_writes_both_and_the_task_is_processed(business: str) -> None:
    app = echo_app(business)
    async with app, app.running():
        async with await connect(business) as conn:
            await conn.execute("INSERT INTO orders (id) VALUES ('o1')")
            task_id = await app.submit("confirm", {"order": "o1"}, key="o1", connection=conn)
            await conn.commit()
        # The NOTIFY sent at commit wakes the scheduler (through the listener).
        result = await app.result(task_id, timeout=10)
        assert result == {"confirmed": {"order": "o1"}}
        assert await orders(business) == ["o1"]
        history = [e.kind for e in await app.history(task_id)]
        assert history[0] == "received"
        assert history[-1] == "processed"
        assert await app.store.count_tasks() == {ProcessState.PROCESSED: 1}


@pytest.mark.postgres
async def test_rollback_leaves_neither_order_nor_task_nor_event(business: str) -> None:
    app = echo_app(business)
    async with app, app.running():
        async with await connect(business) as conn, conn.transaction(force_rollback=True):
            await conn.execute("INSERT INTO orders (id) VALUES ('o2')")
            task_id = await app.submit("confirm", {"order": "o2"}, key="o2", connection=conn)
        assert await orders(business) == []
        assert await app.store.get_task(task_id) is None
        assert await app.store.list_tasks() == []
        assert await app.store.read_events(reply_to=None, after_id=0) == []
        # The key was never used: it can be submitted again.
        again = await app.submit("confirm", {"order": "o2"}, key="o2")
        assert again != task_id
        assert await app.result(again, timeout=10) == {"confirmed": {"order": "o2"}}


@pytest.mark.postgres
async def test_uncommitted_task_is_invisible_and_unclaimable(
    business: str, open_store: OpenStore
) -> None:
    store = await open_store()
    async with await connect(business) as conn:
        await conn.execute("INSERT INTO orders (id) VALUES ('o3')")
        submitted = await store.submit_task_in(
            NewTask(workflow="confirm", input={"order": "o3"}, key="o3"), conn
        )
        assert submitted.created
        assert await store.get_task(submitted.task_id) is None
        assert await store.claim_tasks(locked_by="s1", limit=10) == []
        assert await store.read_events(reply_to=None, after_id=0) == []
        await conn.commit()
    claimed = await store.claim_tasks(locked_by="s1", limit=10)
    assert [t.id for t in claimed] == [submitted.task_id]
    assert [e.kind for e in await store.task_events(submitted.task_id)] == [
        "received",
        "claimed",
    ]


@pytest.mark.postgres
async def test_repeated_key_returns_the_existing_task(business: str, open_store: OpenStore) -> None:
    store = await open_store()
    committed = await store.submit_task(NewTask(workflow="confirm", input=1, key="old"))
    # A caller's connection with its own row factory: the store reads tuples anyway.
    async with await psycopg.AsyncConnection.connect(business, row_factory=dict_row) as conn:
        first = await store.submit_task_in(NewTask(workflow="confirm", input=2, key="k"), conn)
        second = await store.submit_task_in(NewTask(workflow="confirm", input=3, key="k"), conn)
        old = await store.submit_task_in(NewTask(workflow="confirm", input=4, key="old"), conn)
        assert first.created
        assert not second.created
        assert second.task_id == first.task_id
        assert not old.created
        assert old.task_id == committed.task_id
        await conn.commit()
    task = await store.get_task(first.task_id)
    assert task is not None
    assert task.input == 2
    assert len(await store.list_tasks()) == 2
    received: list[Event] = []

    async def delivered() -> bool:  # final once older transactions in the cluster end
        received[:] = await store.read_events(reply_to=None, after_id=0)
        return len(received) >= 2

    await wait_until(delivered, timeout=30)
    assert sorted(e.task_id for e in received) == sorted([committed.task_id, first.task_id])


@pytest.mark.postgres
async def test_bad_payload_raises_and_leaves_the_transaction_usable(business: str) -> None:
    """PayloadError is raised before any statement: the caller's transaction goes on."""
    app = echo_app(business)
    async with app:
        async with await connect(business) as conn:
            await conn.execute("INSERT INTO orders (id) VALUES ('o5')")
            with pytest.raises(PayloadError):
                await app.submit("confirm", {"amount": float("nan")}, connection=conn)
            with pytest.raises(PayloadError):
                await app.submit("confirm", "x" * (2 << 20), connection=conn)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            await conn.execute("INSERT INTO orders (id) VALUES ('o6')")
            await conn.commit()
        assert await orders(business) == ["o5", "o6"]
        assert await app.store.list_tasks() == []


@pytest.mark.postgres
async def test_connection_without_a_usable_transaction_is_refused(
    business: str, store: PostgresStore
) -> None:
    task = NewTask(workflow="confirm", input=None)
    async with await psycopg.AsyncConnection.connect(business, autocommit=True) as conn:
        with pytest.raises(ConfigError, match="autocommit"):
            await store.submit_task_in(task, conn)
        async with conn.transaction():  # an explicit transaction block is fine
            joined = await store.submit_task_in(task, conn)
    assert await store.get_task(joined.task_id) is not None
    async with await connect(business) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await conn.execute("SELECT 1 / 0")
        with pytest.raises(ConfigError, match="failed"):
            await store.submit_task_in(task, conn)
    with pytest.raises(ConfigError, match="AsyncConnection"):
        await store.submit_task_in(task, object())


async def test_sqlite_store_refuses_a_connection(tmp_path: Path) -> None:
    app = echo_app(f"sqlite:///{tmp_path}/shepherd.db")
    async with app:
        with pytest.raises(ConfigError, match="needs the PostgreSQL store"):
            await app.submit("confirm", {"order": "o7"}, connection=object())
        with pytest.raises(ConfigError, match="needs the PostgreSQL store"):
            await app.submit_many([Submission("confirm", {"order": "o7"})], connection=object())
        with pytest.raises(ConfigError, match="needs the PostgreSQL store"):
            await app.submit_many([], connection=object())
        assert await app.list_tasks() == []


@pytest.mark.postgres
async def test_failed_statement_rolls_back_to_a_savepoint(
    store: PostgresStore, make_postgres_url: MakePostgresUrl
) -> None:
    """A connection to a database without the store's tables: the error leaves it usable."""
    other = make_postgres_url(empty=True)
    async with await connect(other) as conn:
        await conn.execute("CREATE TABLE orders (id text PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UndefinedTable):
            await store.submit_task_in(NewTask(workflow="confirm", input=1), conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        await conn.execute("INSERT INTO orders (id) VALUES ('o8')")
        await conn.commit()
    assert await orders(other) == ["o8"]


@pytest.mark.postgres
async def test_submit_many_commits_with_the_callers_rows(business: str) -> None:
    app = echo_app(business)
    async with app, app.running():
        async with await connect(business) as conn:
            await conn.execute("INSERT INTO orders (id) VALUES ('m1'), ('m2')")
            ids = await app.submit_many(
                [Submission("confirm", {"order": o}, key=o) for o in ("m1", "m2")],
                connection=conn,
            )
            assert [await app.store.get_task(task_id) for task_id in ids] == [None, None]
            await conn.commit()
        results = [await app.result(task_id, timeout=10) for task_id in ids]
        assert results == [{"confirmed": {"order": "m1"}}, {"confirmed": {"order": "m2"}}]
        assert await orders(business) == ["m1", "m2"]


@pytest.mark.postgres
async def test_submit_many_rolls_back_with_the_callers_transaction(business: str) -> None:
    app = echo_app(business)
    async with app:
        async with await connect(business) as conn, conn.transaction(force_rollback=True):
            await conn.execute("INSERT INTO orders (id) VALUES ('m3')")
            ids = await app.submit_many(
                [Submission("confirm", n, key=f"k{n}") for n in range(3)], connection=conn
            )
        assert await orders(business) == []
        assert await app.store.list_tasks() == []
        # The keys were never used.
        assert set(await app.submit_many([Submission("confirm", 0, key="k0")])).isdisjoint(ids)


@pytest.mark.postgres
async def test_submit_many_deduplicates_keys_in_the_callers_transaction(
    business: str, open_store: OpenStore
) -> None:
    store = await open_store()
    committed = await store.submit_task(NewTask(workflow="confirm", input=0, key="old"))
    async with await connect(business) as conn:
        first = await store.submit_task_in(NewTask(workflow="confirm", input=1, key="k"), conn)
        many = await store.submit_tasks_in(
            [
                NewTask(workflow="confirm", input=2, key="k"),
                NewTask(workflow="confirm", input=3, key="new"),
                NewTask(workflow="confirm", input=4, key="old"),
                NewTask(workflow="confirm", input=5, key="new"),
            ],
            conn,
        )
        await conn.commit()
    assert [s.task_id for s in many] == [
        first.task_id,
        many[1].task_id,
        committed.task_id,
        many[1].task_id,
    ]
    assert [s.created for s in many] == [False, True, False, False]
    assert len(await store.list_tasks()) == 3


@pytest.mark.postgres
async def test_submit_many_bad_payload_sends_no_statement(business: str) -> None:
    """PayloadError names the submission and comes before any statement: the transaction goes on."""
    app = echo_app(business)
    async with app:
        async with await connect(business) as conn:
            await conn.execute("INSERT INTO orders (id) VALUES ('m5')")
            with pytest.raises(PayloadError, match=r"^submissions\[1\]: "):
                await app.submit_many(
                    [Submission("confirm", 1), Submission("confirm", float("inf"))],
                    connection=conn,
                )
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            await conn.commit()
        assert await orders(business) == ["m5"]
        assert await app.store.list_tasks() == []


@pytest.mark.postgres
async def test_submit_many_checks_the_connection_even_with_nothing_to_submit(
    business: str, store: PostgresStore
) -> None:
    async with await psycopg.AsyncConnection.connect(business, autocommit=True) as conn:
        with pytest.raises(ConfigError, match="autocommit"):
            await store.submit_tasks_in([], conn)
        async with conn.transaction():
            assert await store.submit_tasks_in([], conn) == []


@pytest.mark.postgres
async def test_submit_many_failed_statement_rolls_back_to_a_savepoint(
    store: PostgresStore, make_postgres_url: MakePostgresUrl
) -> None:
    other = make_postgres_url(empty=True)
    async with await connect(other) as conn:
        await conn.execute("CREATE TABLE orders (id text PRIMARY KEY)")
        with pytest.raises(psycopg.errors.UndefinedTable):
            await store.submit_tasks_in([NewTask(workflow="confirm", input=1)], conn)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        await conn.execute("INSERT INTO orders (id) VALUES ('m8')")
        await conn.commit()
    assert await orders(other) == ["m8"]
