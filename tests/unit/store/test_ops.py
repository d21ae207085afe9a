"""The typed store seam: each operation declared once, a store method and a handler per backend for each."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Awaitable, Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, assert_type, cast

import pytest

from shepherd.core.breaker import Breaker, BreakerPolicy
from shepherd.core.breaker import Decision as BreakerDecision
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState
from shepherd.core.workers import Worker
from shepherd.store import ops
from shepherd.store.contract import NewTask, Store, Submitted
from shepherd.store.dispatch import WriteTable
from shepherd.store.ops import base
from shepherd.store.ops.base import Runs
from shepherd.store.ops.claims import Claims
from shepherd.store.ops.events import Events
from shepherd.store.ops.queues import Queues
from shepherd.store.postgres import handlers as pg
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite import handlers as lite

T = TypeVar("T")


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
    op = ops.ClaimTasks(locked_by="s1", limit=5)
    assert op == ops.ClaimTasks(locked_by="s1", limit=5)
    with pytest.raises(AttributeError):
        op.limit = 6  # type: ignore[misc]


def _concepts() -> list[tuple[ModuleType, list[type[ops.Op[Any]]], list[type[Runs]]]]:
    """Each concept's module of `shepherd.store.ops`: its operations, and its classes of methods."""
    found = []
    for info in pkgutil.iter_modules(ops.__path__):
        module = importlib.import_module(f"{ops.__name__}.{info.name}")
        if module is base:
            continue
        own = [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if c.__module__ == module.__name__
        ]
        found.append(
            (
                module,
                [c for c in own if issubclass(c, ops.Op)],
                [c for c in own if issubclass(c, Runs)],
            )
        )
    return found


def test_every_operation_is_declared_in_one_concept_and_reexported() -> None:
    declared = [op for _, found, _ in _concepts() for op in found]
    assert len(declared) == len(set(declared))
    assert set(declared) == _concrete(ops.Op)
    assert {op.__name__ for op in declared} <= set(ops.__all__)


@pytest.mark.parametrize("concept", _concepts(), ids=lambda c: c[0].__name__.rsplit(".", 1)[-1])
def test_every_operation_has_a_store_method_in_its_concept(
    concept: tuple[ModuleType, list[type[ops.Op[Any]]], list[type[Runs]]],
) -> None:
    """Derived (`name = method(Op)`), or written by hand where the call differs from the fields."""
    module, declared, (methods, *others) = concept
    assert others == [], f"{module.__name__}: one class of store methods"
    derived = {getattr(member, "op", None) for _, member in inspect.getmembers(methods)}
    written = inspect.getsource(methods)
    for op in declared:
        assert op.__doc__, f"{op.__name__} states its guarantee in its docstring"
        assert op in derived or f"{op.__name__}(" in written, f"no store method runs {op.__name__}"
    assert issubclass(Store, methods), f"Store lacks {methods.__name__}"


async def test_a_derived_method_builds_its_operation_and_runs_it_by_its_kind() -> None:
    ran: list[tuple[str, object]] = []

    class Recording(Claims, Events):
        def write(self, op: ops.Write[T], /) -> Awaitable[T]:
            return self._run("write", op)

        def read(self, op: ops.Read[T], /) -> Awaitable[T]:
            return self._run("read", op)

        async def _run(self, how: str, op: object) -> Any:
            ran.append((how, op))
            return []

    store = Recording()
    assert await store.claim_tasks(locked_by="s1", limit=2) == []
    assert await store.task_events("t1") == []
    assert ran == [
        ("write", ops.ClaimTasks(locked_by="s1", limit=2)),
        ("read", ops.TaskEvents("t1")),
    ]
    assert (
        str(inspect.signature(vars(Claims)["claim_tasks"]))
        == "(self, /, *, locked_by: 'str', limit: 'int', skip: 'Sequence[str]' = ())"
    )
    assert vars(Claims)["claim_tasks"].__doc__ == ops.ClaimTasks.__doc__
    with pytest.raises(TypeError):
        await store.claim_tasks(owner="s1", limit=2)  # type: ignore[call-arg]


async def test_a_derived_method_passes_a_tuple_for_a_sequence_so_its_operation_is_a_value() -> None:
    ran: list[object] = []

    class Recording(Queues):
        async def write(self, op: ops.Write[T], /) -> T:
            ran.append(op)
            return cast("T", [])

        async def read(self, op: ops.Read[T], /) -> T:
            raise AssertionError(op)

    agents = ["a", "b"]
    await Recording().take_requests(agents=agents, worker="w", limit=1)
    agents.append("c")  # the caller's list, changed after the call
    (op,) = ran
    assert op == ops.TakeRequests(agents=("a", "b"), worker="w", limit=1)
    assert hash(op) == hash(ops.TakeRequests(agents=("a", "b"), worker="w", limit=1))


async def test_the_facade_returns_what_each_operation_promises(tmp_path: Path) -> None:
    """`assert_type` is checked by mypy (the tests are type-checked); the values at run time."""
    store = SQLiteStore(f"sqlite:///{tmp_path / 'ops.db'}")
    await store.open()
    try:
        submitted = assert_type(await store.submit_task(NewTask(workflow="w", input=1)), Submitted)
        claimed = assert_type(await store.claim_tasks(locked_by="s/1", limit=5), list[Task])
        assert [t.id for t in claimed] == [submitted.task_id]
        assert_type(await store.get_task(submitted.task_id), Task | None)
        assert_type(await store.count_tasks(), dict[ProcessState, int])
        assert_type(await store.task_events(submitted.task_id), list[Event])
        assert_type(await store.record_replies(locked_by="s/1", limit=5), list[tuple[Reply, bool]])
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
