"""`app.move_partition`: a move that drains, with steps in flight on the partition's resource.

Every test runs on a FakeClock (`fake_time`): the mover looks again every
MOVE_POLL fake seconds, which the test passes with `pass_until`. The agent
writes what it does to one list, in order (`Log`): that order, not time, shows
that no step for the partition's entities started on the new resource before
every one on the old resource had ended, and that the move came in between.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import AgentRequest, App, StepState, WorkflowContext
from shepherd.core.moves import InFlightStep, PartitionMove
from shepherd.core.resources import Resource
from shepherd.errors import (
    InvalidResourceError,
    PartitionMovingError,
    UnknownPartitionError,
    UnknownResourceError,
)
from shepherd.governance.resolver import StoreResolver
from shepherd.testing import wait_until
from support.backends import sqlite_only
from support.fake_time import ended, pass_until

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

#: Real seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
USERS = ("user-1", "user-2", "user-3")
DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"})
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})


class Log:
    """What the agent did, in order: (what, task id, step, resource)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, int, str]] = []
        #: Opened by the test: the first wave's handlings finish then.
        self.gate = asyncio.Event()
        #: Opened by the test: a task's call beside its first one (`parallel`) starts then.
        self.beside = asyncio.Event()

    def of(self, what: str, resource: str | None = None) -> list[tuple[str, str, int, str]]:
        return [
            line
            for line in self.lines
            if line[0] == what and (resource is None or line[3] == resource)
        ]


async def mapped(app: App) -> Log:
    """db1 and db2; p1 on db1 holding USERS; the agent `write` logs, its first wave held."""
    await app.open()
    await app.store.add_resource(DB1)
    await app.store.add_resource(DB2)
    await app.store.move_partition("p1", "db1")
    for user in USERS:
        await app.store.assign_entity(user, "p1")
    log = Log()

    @app.agent("write")
    async def write(request: AgentRequest) -> JsonValue:
        assert request.resolution is not None
        where = request.resolution.resource.name
        log.lines.append(("start", request.task_id, request.seq, where))
        if request.payload["hold"]:
            await log.gate.wait()
        log.lines.append(("end", request.task_id, request.seq, where))
        return where

    @app.workflow("save")
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        # Steps for one entity, the first held while the move begins; with `parallel`,
        # another beside it (asyncio.gather), started once the test opens `beside`.
        user = data["user"]

        async def beside() -> JsonValue:
            await log.beside.wait()
            return await ctx.call("write", {"hold": False}, entity=user)

        first = ctx.call("write", {"hold": data["hold"]}, entity=user)
        done = list(await asyncio.gather(first, beside())) if data["parallel"] else [await first]
        return [*done, await ctx.call("write", {"hold": False}, entity=user)]

    return log


async def in_flight(app: App, log: Log, *, parallel: bool = False) -> list[str]:
    """Submit one task per user and wait until each one's first step runs, held, on db1."""
    data = {"hold": True, "parallel": parallel}
    ids = [await app.submit("save", {"user": user, **data}) for user in USERS]
    await wait_until(lambda: len(log.of("start")) == len(USERS), timeout=PATIENCE)
    return ids


async def draining(app: App) -> bool:
    found, _ = await app.store.resolve("user-1")
    return found is not None and found.draining_until is not None


async def test_a_move_waits_for_the_steps_in_flight_and_holds_the_ones_that_would_start(
    app: App,
) -> None:
    log = await mapped(app)
    async with app.running():
        ids = await in_flight(app, log, parallel=True)
        mover = asyncio.create_task(app.move_partition("p1", "db2"))
        mover.add_done_callback(lambda _: log.lines.append(("moved", "", 0, "")))
        await pass_until(app, lambda: draining(app), message="the partition is not draining")
        # The calls beside the held ones, and a task submitted now: they wait for the
        # move, as do the steps after the held ones.
        log.beside.set()
        late = await app.submit("save", {"user": "user-2", "hold": False, "parallel": False})
        resolver = app.resolver
        assert isinstance(resolver, StoreResolver)
        await pass_until(app, lambda: resolver.statistics()["drain_waits"] > 0)
        assert not mover.done()
        assert len(log.of("start")) == len(USERS)  # nothing started meanwhile

        log.gate.set()
        await pass_until(app, mover.done, message="the move did not end")
        for task_id in [*ids, late]:
            await ended(app, task_id)

    done = mover.result()
    assert isinstance(done, PartitionMove)
    assert (done.previous, done.partition.resource, done.partition.entities) == ("db1", "db2", 3)
    assert (done.waited_for, done.in_flight, done.now, done.timed_out) == (3, (), False, False)
    # By the order of the log: every handling on db1 ended, then the move, then db2 began.
    kinds = [line[0] for line in log.lines]
    moved_at = kinds.index("moved")
    assert {line[3] for line in log.lines[:moved_at]} == {"db1"}
    assert {line[3] for line in log.lines[moved_at + 1 :]} == {"db2"}
    assert len(log.of("end", "db1")) == len(USERS)
    assert len(log.of("start", "db2")) == 2 * len(USERS) + 2
    for task_id in ids:
        # Its step beside the held one did not run beside it: it waited for the move.
        assert await app.result(task_id, timeout=PATIENCE) == ["db1", "db2", "db2"]
        task = await app.get_task(task_id)
        # The waiting steps were neither failed nor charged: one attempt each.
        assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 1)] * 3
        assert task.failure_count == 0
    assert await app.result(late, timeout=PATIENCE) == ["db2", "db2"]


async def test_a_move_now_reports_the_steps_in_flight(app: App) -> None:
    log = await mapped(app)
    async with app.running():
        ids = await in_flight(app, log)

        done = await app.move_partition("p1", "db2", now=True)

        assert (done.previous, done.partition.resource, done.now) == ("db1", "db2", True)
        assert done.in_flight == tuple(
            InFlightStep(task_id=task_id, seq=1, agent="write", attempt=1)
            for task_id in sorted(ids)
        )
        log.gate.set()
        for task_id in ids:
            # The steps in flight kept the resource they were sent to.
            assert await app.result(task_id, timeout=PATIENCE) == ["db1", "db2"]


async def test_a_timeout_moves_with_the_steps_still_in_flight(app: App) -> None:
    log = await mapped(app)
    async with app.running():
        ids = await in_flight(app, log)
        mover = asyncio.create_task(app.move_partition("p1", "db2", timeout=3.0))
        await pass_until(app, lambda: draining(app))
        # A second move of the partition meanwhile is refused, naming it.
        with pytest.raises(PartitionMovingError, match="partition 'p1' is being moved"):
            await app.move_partition("p1", "db1", now=True)

        await pass_until(app, mover.done, message="the timeout did not pass")

        done = mover.result()
        assert (done.partition.resource, done.timed_out, done.waited_for) == ("db2", True, 3)
        assert {step.task_id for step in done.in_flight} == set(ids)
        log.gate.set()
        for task_id in ids:
            assert await app.result(task_id, timeout=PATIENCE) == ["db1", "db2"]


async def test_a_move_that_stops_early_leaves_the_partition_where_it_was(app: App) -> None:
    log = await mapped(app)
    async with app.running():
        ids = await in_flight(app, log)
        mover = asyncio.create_task(app.move_partition("p1", "db2"))
        await pass_until(app, lambda: draining(app))

        mover.cancel()
        with pytest.raises(asyncio.CancelledError):
            await mover

        assert not await draining(app)
        log.gate.set()
        for task_id in ids:
            assert await app.result(task_id, timeout=PATIENCE) == ["db1", "db1"]


@sqlite_only()
async def test_bad_moves_are_refused_naming_the_partition(app: App) -> None:
    await mapped(app)
    version = await app.store.resolver_version()

    for timeout in (0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidResourceError, match="move of partition 'p1': timeout must"):
            await app.move_partition("p1", "db2", timeout=timeout)
    with pytest.raises(InvalidResourceError, match="move of partition 'p1': a move made at once"):
        await app.move_partition("p1", "db2", timeout=5.0, now=True)
    with pytest.raises(UnknownResourceError, match="'db9' \\(for partition 'p1'\\)"):
        await app.move_partition("p1", "db9")
    with pytest.raises(UnknownPartitionError, match="unknown partition 'p9'"):
        await app.move_partition("p9", "db2", now=True)

    assert await app.store.resolver_version() == version
