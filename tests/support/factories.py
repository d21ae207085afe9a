"""Factories for store-level tests: "a task in state X" built through the store contract.

Every helper goes through `shepherd.store.contract.Store` methods only, so the
same helpers serve every backend of the conformance suite.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, final

from shepherd.core.states import ProcessState, StepKind
from shepherd.core.supervision import Reset, SupervisionPolicy, on_expired
from shepherd.store.contract import NewTask, StepStart

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from datetime import datetime
    from pathlib import Path

    from shepherd.clock import Clock
    from shepherd.core.records import JsonValue, Lease, Request, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


@final
@dataclass(frozen=True, slots=True)
class Backend:
    """How the conformance suite makes databases and stores of one backend."""

    name: str
    #: A fresh, empty database under the given directory; returns its URL.
    create: Callable[[Path], Awaitable[str]]
    #: A store on the URL's database, using the clock (not yet opened).
    connect: Callable[[str, Clock], Store]
    #: The migration versions recorded in the URL's database, in order.
    applied_migrations: Callable[[str], Awaitable[list[int]]]


@final
class Stores:
    """Opens stores on one test database; closes them all at the end.

    Args:
        connect: Makes a store (not yet opened) on a URL with a clock.
        url: The test's database.
        clock: The clock stores get unless told otherwise.
    """

    def __init__(self, connect: Callable[[str, Clock], Store], url: str, clock: FakeClock) -> None:
        self._connect = connect
        self.url = url
        self.clock = clock
        self._opened: list[Store] = []

    async def connect(self, clock: Clock | None = None) -> Store:
        """Another opened store on the same database (its own connection, as another process has)."""
        store = self._connect(self.url, clock or self.clock)
        await store.open()
        self._opened.append(store)
        return store

    async def close(self) -> None:
        """Close every store opened here, newest first."""
        for store in reversed(self._opened):
            await store.close()


#: The lease name the supervisor role uses.
SUPERVISOR_LEASE = "supervisor"


def new_task(
    workflow: str = "wf",
    data: JsonValue = None,
    *,
    key: str | None = None,
    reply_to: str | None = None,
    complete_within: float = 30.0,
) -> NewTask:
    """What `submit_task` inserts, with defaults."""
    return NewTask(
        workflow=workflow,
        input=data,
        key=key,
        reply_to=reply_to,
        complete_within=complete_within,
    )


async def submitted_task(store: Store, **fields: JsonValue) -> Task:
    """A new pending task (see `new_task` for the fields)."""
    submitted = await store.submit_task(new_task(**fields))
    task = await store.get_task(submitted.task_id)
    assert task is not None
    return task


async def claimed_task(store: Store, *, locked_by: str = "s1", **fields: JsonValue) -> Task:
    """A new task claimed by `locked_by` (the store must hold no other claimable task)."""
    submitted = await submitted_task(store, **fields)
    claimed = await store.claim_tasks(locked_by=locked_by, limit=10)
    assert [t.id for t in claimed] == [submitted.id], "the store held other claimable tasks"
    return claimed[0]


async def tasks_in_error(
    store: Store,
    n: int,
    *,
    workflow: str = "wf",
    keyed: bool = True,
    reason: Callable[[str], str] = lambda task_id: f"declined {task_id}",
    locked_by: str = "s1",
    clock: FakeClock | None = None,
) -> list[str]:
    """`n` new tasks failed into `error` by their owner (each stores an alert), oldest first.

    Keyed `{workflow}-{i}` if `keyed`; `reason(task_id)` is each one's error
    reason; with `clock`, a second passes between two submits.
    """
    ids = []
    for i in range(n):
        task = NewTask(workflow=workflow, input={"n": i}, key=f"{workflow}-{i}" if keyed else None)
        ids.append((await store.submit_task(task)).task_id)
        if clock is not None:
            clock.advance(1)
    if not ids:
        return ids
    claimed = {t.id: t for t in await store.claim_tasks(locked_by=locked_by, limit=n)}
    for task_id in ids:
        await store.fail_task(
            task_id,
            locked_by=locked_by,
            epoch=claimed[task_id].lock_epoch,
            state=ProcessState.ERROR,
            error={"reason": reason(task_id)},
        )
    return ids


def step_start(
    task: Task,
    *,
    seq: int = 1,
    agent: str = "a",
    attempt: int = 1,
    within: float = 10.0,
    payload: JsonValue = None,
    locked_by: str | None = None,
    epoch: int | None = None,
    kind: StepKind = StepKind.FORWARD,
    undo: str | None = None,
) -> StepStart:
    """A `start_step` write by the task's holder at its epoch, unless told otherwise."""
    writer = locked_by if locked_by is not None else task.locked_by
    assert writer is not None, "the task is not claimed: pass locked_by="
    return StepStart(
        task_id=task.id,
        locked_by=writer,
        epoch=task.lock_epoch if epoch is None else epoch,
        seq=seq,
        agent=agent,
        payload={"seq": seq} if payload is None else payload,
        within=within,
        attempt=attempt,
        kind=kind,
        undo=undo,
    )


async def taken_request(store: Store, *, agent: str = "a", worker: str = "w1") -> Request:
    """Lease the one visible request for `agent` (exactly one must be visible)."""
    taken = await store.take_requests(agents=[agent], worker=worker, limit=10)
    assert len(taken) == 1, f"expected one visible request for {agent!r}, got {taken}"
    return taken[0]


async def leadership(store: Store, *, holder: str = "sup", ttl: float = 60.0) -> Lease:
    """The supervisor lease for `holder` (no one else may hold it)."""
    lease = await store.acquire_lease(SUPERVISOR_LEASE, holder=holder, ttl=ttl)
    assert lease is not None, "someone else holds the supervisor lease"
    return lease


async def expire(store: Store, clock: FakeClock, task: Task) -> Task:
    """Move `clock` just past the task's current complete_by; return the expired task."""
    current = await store.get_task(task.id)
    assert current is not None
    assert current.complete_by is not None, "the task is not claimed"
    clock.advance(max(0.0, (current.complete_by - clock.now()).total_seconds()) + 0.5)
    expired = {t.id: t for t in await store.expired_claims(limit=1000)}
    assert task.id in expired, "the task's claim did not expire"
    return expired[task.id]


async def supervisor_reset(
    store: Store,
    clock: FakeClock,
    task: Task,
    *,
    holder: str = "sup",
    not_before_in: float = 0.0,
) -> Task:
    """Expire the task's claim and apply a supervisor `Reset`; return the task after it."""
    expired = await expire(store, clock, task)
    decision = on_expired(
        expired, SupervisionPolicy(max_failures=100), now=store.now(), rng=random.Random(0)
    )
    assert isinstance(decision, Reset)
    decision = Reset(
        failure_count=decision.failure_count,
        not_before=store.now() + timedelta(seconds=not_before_in),
        process_state=decision.process_state,
        reason=decision.reason,
    )
    lease = await leadership(store, holder=holder)
    assert await store.apply_supervision(expired, decision, leader=lease)
    after = await store.get_task(task.id)
    assert after is not None
    return after


async def snapshot(store: Store, task_id: str) -> tuple[Task | None, list[tuple[str, JsonValue]]]:
    """The task (with steps) and its history, to prove that a refused write changed nothing."""
    events = [(e.kind, e.detail) for e in await store.task_events(task_id)]
    return await store.get_task(task_id), events


def later(instant: datetime, seconds: float) -> datetime:
    """`instant` plus `seconds`."""
    return instant + timedelta(seconds=seconds)
