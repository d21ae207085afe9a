"""The typed store seam: every operation has a handler in both backends, and the facade's types hold."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, assert_type

import pytest

from shepherd.core.breaker import Breaker, BreakerPolicy
from shepherd.core.breaker import Decision as BreakerDecision
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState
from shepherd.core.workers import Worker
from shepherd.store import ops
from shepherd.store.contract import NewTask, Store, Submitted
from shepherd.store.dispatch import WriteTable
from shepherd.store.facade import Facade
from shepherd.store.postgres import handlers as pg
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite import handlers as lite


def _concrete(base: type[ops.Op[Any]]) -> set[type[ops.Op[Any]]]:
    return {
        cls
        for _, cls in inspect.getmembers(ops, inspect.isclass)
        if issubclass(cls, base) and cls not in (ops.Op, ops.Write, ops.Read)
    }


@pytest.mark.parametrize("table", [lite.WRITES, pg.WRITES], ids=["sqlite", "postgres"])
def test_every_write_has_exactly_one_handler(table: dict[type[Any], Any]) -> None:
    assert set(table) == _concrete(ops.Write)


@pytest.mark.parametrize("table", [lite.READS, pg.READS], ids=["sqlite", "postgres"])
def test_every_read_has_exactly_one_handler(table: dict[type[Any], Any]) -> None:
    assert set(table) == _concrete(ops.Read)


def test_a_second_handler_for_one_operation_is_refused() -> None:
    table: WriteTable[object, list[object]] = WriteTable()

    @table.handles(ops.ClaimTasks)
    def claim(batch: object, claims: Sequence[ops.ClaimTasks]) -> list[object]:
        return [[] for _ in claims]

    with pytest.raises(RuntimeError, match="two handlers for ClaimTasks"):
        table.handles(ops.ClaimTasks)(claim)


def test_an_operation_is_a_frozen_value() -> None:
    op = ops.ClaimTasks(owner="s1", limit=5)
    assert op == ops.ClaimTasks(owner="s1", limit=5)
    with pytest.raises(AttributeError):
        op.limit = 6  # type: ignore[misc]


def test_the_facade_implements_the_whole_contract() -> None:
    contract = {
        name
        for name, member in inspect.getmembers(Store)
        if not name.startswith("_") and callable(member)
    }
    assert contract <= {name for name in dir(Facade) if not name.startswith("_")}


async def test_the_facade_returns_what_each_operation_promises(tmp_path: Path) -> None:
    """`assert_type` is checked by mypy (the tests are type-checked); the values at run time."""
    store = SQLiteStore(f"sqlite:///{tmp_path / 'ops.db'}")
    await store.open()
    try:
        submitted = assert_type(await store.submit_task(NewTask(workflow="w", input=1)), Submitted)
        claimed = assert_type(await store.claim_tasks(owner="s/1", limit=5), list[Task])
        assert [t.id for t in claimed] == [submitted.task_id]
        assert_type(await store.get_task(submitted.task_id), Task | None)
        assert_type(await store.count_tasks(), dict[ProcessState, int])
        assert_type(await store.task_events(submitted.task_id), list[Event])
        assert_type(await store.record_replies(owner="s/1", limit=5), list[tuple[Reply, bool]])
        assert_type(await store.take_requests(agents=["a"], worker="w", limit=1), list[Request])
        assert_type(await store.begin_once("k", holder="h"), tuple[str, JsonValue])
        allowed = await store.breaker_allow("svc", BreakerPolicy())
        assert_type(allowed, tuple[Breaker, BreakerDecision])
        lease = assert_type(await store.acquire_lease("l", holder="h", ttl=5), Lease | None)
        assert lease is not None
        assert lease.holder == "h"
        worker = await store.register_worker("i", host="h", pid=1, roles=["agent"], agents=[])
        assert_type(worker, Worker)
        assert_type(await store.dead_workers(["i"], ttl=5), set[str])
        purged = await store.purge_tasks(ended_before=datetime.now().astimezone(), limit=1)
        assert_type(purged, int)
    finally:
        await store.close()
