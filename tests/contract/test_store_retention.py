"""Retention at store level: ended tasks purged with every row that names them, keys kept as tombstones.

`purge_tasks` deletes only tasks that ended (`processed`, `compensated`,
`cancelled`) before the cut-off, at most `limit` of them, oldest first, each
with its steps, events, requests, replies and done keys; a keyed one leaves a
tombstone, through which a resubmitted key keeps returning the purged task
until `purge_tombstones` deletes it. Rows are counted with SQL of our own,
table by table, not through the store under test.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from datetime import timedelta
from typing import TYPE_CHECKING

import psycopg

from shepherd.core.states import ProcessState
from shepherd.store.sqlite import path_from_url
from support.factories import claimed_task, new_task, step_start, submitted_task, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Backend, Stores

#: Every table that holds rows of a task, and how to count one task's rows there.
PER_TASK = {
    "tasks": "SELECT count(*) FROM tasks WHERE id = {p}",
    "steps": "SELECT count(*) FROM steps WHERE task_id = {p}",
    "events": "SELECT count(*) FROM events WHERE task_id = {p}",
    "requests": "SELECT count(*) FROM requests WHERE task_id = {p}",
    "replies": "SELECT count(*) FROM replies WHERE task_id = {p}",
    "done_keys": "SELECT count(*) FROM done_keys WHERE substr(key, 1, 21) = {p} || '/'",
}
TABLES = (*PER_TASK, "tombstones")


async def _count(backend: Backend, url: str, query: str, params: tuple[str, ...] = ()) -> int:
    if backend.name == "sqlite":
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            return int(conn.execute(query.format(p="?"), params).fetchone()[0])
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(query.format(p="%s"), params)
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])


async def rows_of(backend: Backend, url: str, task_id: str) -> dict[str, int]:
    """How many rows each table holds for the task."""
    return {t: await _count(backend, url, q, (task_id,)) for t, q in PER_TASK.items()}


async def totals(backend: Backend, url: str) -> dict[str, int]:
    """How many rows each table holds in all."""
    return {t: await _count(backend, url, f"SELECT count(*) FROM {t}") for t in TABLES}


async def processed_with_everything(store: Store, *, key: str | None = "order-1") -> Task:
    """A processed task with rows in every table: steps, events, done keys (done and
    started), a reply never recorded and a request never taken."""
    task = await claimed_task(store, locked_by="s1", key=key)
    await store.start_step(step_start(task, seq=1, agent="a"))
    first = await taken_request(store, agent="a")
    assert (await store.begin_once(f"{task.id}/1", holder="w1"))[0] == "new"
    assert await store.finish_once(f"{task.id}/1", holder="w1", result={"charged": 1})
    assert (await store.begin_once(f"{task.id}/1/mail", holder="w1"))[0] == "new"
    assert await store.reply_and_ack(first, worker="w1", ok=True, body={"ok": 1})
    assert [ok for _, ok in await store.record_replies(locked_by="s1", limit=10)] == [True]
    await store.start_step(step_start(task, seq=2, agent="a"))
    second = await taken_request(store, agent="a")
    assert await store.reply_and_ack(second, worker="w1", ok=True, body={"late": 1})
    await store.start_step(step_start(task, seq=3, agent="b"))
    await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result={"done": 1})
    return task


async def ended(store: Store, state: ProcessState, *, key: str | None = None) -> Task:
    """A task its owner ended in `state` (compensated, cancelled or error) after one step."""
    task = await claimed_task(store, locked_by="s1", key=key)
    await store.start_step(step_start(task, seq=1, agent="a"))
    assert (await store.begin_once(f"{task.id}/1", holder="w1"))[0] == "new"
    await store.fail_task(
        task.id, locked_by="s1", epoch=task.lock_epoch, state=state, error={"reason": "x"}
    )
    return task


async def every_state(store: Store, *, pending: bool = True) -> dict[str, Task]:
    """One task in each state (pending too, unless told), all changed at the clock's instant."""
    tasks = {
        "processed": await processed_with_everything(store),
        "compensated": await ended(store, ProcessState.COMPENSATED, key="order-2"),
        "cancelled": await ended(store, ProcessState.CANCELLED),
        "error": await ended(store, ProcessState.ERROR, key="order-3"),
        "processing": await claimed_task(store, locked_by="s1"),
    }
    compensating = await claimed_task(store, locked_by="s1")
    await store.start_compensation(
        compensating.id, locked_by="s1", epoch=compensating.lock_epoch, error={"reason": "undo"}
    )
    tasks["compensating"] = compensating
    if pending:
        tasks["pending"] = await submitted_task(store)
    return tasks


async def test_a_purge_deletes_the_ended_tasks_older_than_the_cutoff_and_every_row_of_theirs(
    backend: Backend, stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    old = await every_state(store, pending=False)
    assert (await store.begin_once("not-a-task/1", holder="w1"))[0] == "new"
    fake_clock.advance(100)
    recent = await processed_with_everything(store, key="order-4")
    old["pending"] = await submitted_task(store)  # claimable: made after the last claim
    fake_clock.advance(10)
    tasks = {**{f"old {k}": t for k, t in old.items()}, "recent processed": recent}
    before = {name: await rows_of(backend, stores.url, t.id) for name, t in tasks.items()}
    assert all(before["old processed"].values()), "the fixture left a table empty"

    purged = await store.purge_tasks(ended_before=store.now() - timedelta(seconds=50), limit=100)

    assert purged == 3
    gone = {"old processed", "old compensated", "old cancelled"}
    after = {name: await rows_of(backend, stores.url, t.id) for name, t in tasks.items()}
    for name in tasks:
        expected = dict.fromkeys(PER_TASK, 0) if name in gone else before[name]
        assert after[name] == expected, name
        assert (await store.get_task(tasks[name].id) is None) is (name in gone)
    # Nothing else went, and nothing of theirs was left behind.
    kept = [after[name] for name in tasks if name not in gone]
    expected_totals = {t: sum(rows[t] for rows in kept) for t in PER_TASK}
    expected_totals["done_keys"] += 1  # "not-a-task/1"
    expected_totals["tombstones"] = 2  # the two keyed ones purged
    assert await totals(backend, stores.url) == expected_totals


async def test_tasks_that_have_not_ended_or_wait_in_error_are_never_purged(
    backend: Backend, stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    tasks = await every_state(store)
    live = {k: t for k, t in tasks.items() if k not in ("processed", "compensated", "cancelled")}
    before = {k: await rows_of(backend, stores.url, t.id) for k, t in live.items()}
    fake_clock.advance(timedelta(days=3650))

    assert await store.purge_tasks(ended_before=store.now(), limit=100) == 3
    assert await store.purge_tasks(ended_before=store.now(), limit=100) == 0

    for name, task in live.items():
        assert await rows_of(backend, stores.url, task.id) == before[name], name
        found = await store.get_task(task.id)
        assert found is not None
        assert str(found.process_state) == name


async def test_a_purge_deletes_at_most_limit_tasks_oldest_first(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = []
    for n in range(5):
        ids.append((await ended(store, ProcessState.COMPENSATED, key=f"k{n}")).id)
        fake_clock.advance(1)
    fake_clock.advance(100)

    async def left() -> list[str]:
        return [t for t in ids if await store.get_task(t) is not None]

    assert await store.purge_tasks(ended_before=store.now(), limit=2) == 2
    assert await left() == ids[2:]
    assert await store.purge_tasks(ended_before=store.now(), limit=2) == 2
    assert await left() == ids[4:]
    assert await store.purge_tasks(ended_before=store.now(), limit=2) == 1
    assert await store.purge_tasks(ended_before=store.now(), limit=2) == 0


async def test_a_purged_key_returns_its_task_and_creates_nothing_until_its_tombstone_goes(
    backend: Backend, stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    task = await processed_with_everything(store, key="order-9")
    fake_clock.advance(60)
    assert await store.purge_tasks(ended_before=store.now(), limit=10) == 1
    purged_at = store.now()
    fake_clock.advance(3600)

    again = await asyncio.gather(
        *(store.submit_task(new_task("wf", {"n": n}, key="order-9")) for n in range(5))
    )

    assert {(s.task_id, s.created) for s in again} == {(task.id, False)}
    assert await store.get_task(task.id) is None
    assert await totals(backend, stores.url) == {**dict.fromkeys(TABLES, 0), "tombstones": 1}
    # The key is per workflow, as for live tasks.
    other = await store.submit_task(new_task("other", key="order-9"))
    assert other.created

    # Tombstones purged before the cut-off only; then the key runs again.
    assert await store.purge_tombstones(purged_before=purged_at, limit=10) == 0
    assert (await store.submit_task(new_task("wf", key="order-9"))).task_id == task.id
    assert await store.purge_tombstones(purged_before=store.now(), limit=10) == 1
    fresh = await store.submit_task(new_task("wf", {"v": 2}, key="order-9"))
    assert fresh.created
    assert fresh.task_id != task.id
    found = await store.get_task(fresh.task_id)
    assert found is not None
    assert (found.input, found.process_state) == ({"v": 2}, ProcessState.PENDING)


async def test_a_tombstone_says_how_and_when_the_keyed_task_ended(
    store: Store, fake_clock: FakeClock
) -> None:
    keyed = await ended(store, ProcessState.CANCELLED, key="order-5")
    ended_at = store.now()
    unkeyed = await ended(store, ProcessState.COMPENSATED)
    fake_clock.advance(30)

    assert await store.purge_tasks(ended_before=store.now(), limit=10) == 2

    tombstone = await store.get_tombstone(keyed.id)
    assert tombstone is not None
    assert (tombstone.task_id, tombstone.workflow, tombstone.key) == (keyed.id, "wf", "order-5")
    assert tombstone.process_state is ProcessState.CANCELLED
    assert (tombstone.ended_at, tombstone.purged_at) == (ended_at, store.now())
    assert await store.get_tombstone(unkeyed.id) is None  # no key, nothing to answer for
    assert await store.get_tombstone("never-was") is None


async def test_tombstones_are_purged_oldest_first_in_batches(
    store: Store, fake_clock: FakeClock
) -> None:
    ids = []
    for n in range(3):
        ids.append((await ended(store, ProcessState.COMPENSATED, key=f"k{n}")).id)
        fake_clock.advance(1)
        assert await store.purge_tasks(ended_before=store.now(), limit=10) == 1
    fake_clock.advance(10)

    assert await store.purge_tombstones(purged_before=store.now(), limit=2) == 2
    assert [await store.get_tombstone(t) is None for t in ids] == [True, True, False]
    assert await store.purge_tombstones(purged_before=store.now(), limit=2) == 1
    assert await store.purge_tombstones(purged_before=store.now(), limit=2) == 0


async def test_two_purgers_at_once_delete_each_task_once(
    stores: Stores, store: Store, fake_clock: FakeClock
) -> None:
    ids = [(await ended(store, ProcessState.CANCELLED, key=f"k{n}")).id for n in range(30)]
    other = await stores.connect()
    fake_clock.advance(10)

    counts = await asyncio.gather(
        *(s.purge_tasks(ended_before=store.now(), limit=4) for s in [store, other] * 10)
    )

    assert sum(counts) == 30
    assert all(c <= 4 for c in counts)
    assert [t for t in ids if await store.get_task(t) is not None] == []
    assert all([await other.get_tombstone(t) is not None for t in ids])


async def test_a_checkpoint_changes_nothing_and_the_store_goes_on(
    store: Store, fake_clock: FakeClock
) -> None:
    submitted = [await store.submit_task(new_task(data={"n": n})) for n in range(20)]

    await store.checkpoint()
    await store.checkpoint()

    assert len(await store.list_tasks()) == 20
    more = await store.submit_task(new_task(data={"n": 20}))
    assert more.created
    assert {t.id for t in await store.list_tasks()} == {s.task_id for s in [*submitted, more]}
