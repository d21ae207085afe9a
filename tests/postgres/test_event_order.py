"""Event readers never skip an event, with no cluster-wide lock held by writers.

Event ids are taken at insert time and become visible at commit, so a later id
can be visible first. `read_events` delivers events in (xid, id) order below
the oldest transaction still in flight; these tests hold a transaction open
across that window and run many writers at once against a tailing reader.
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from shepherd.core.records import Event
from shepherd.store.contract import NewTask
from shepherd.store.postgres import PostgresStore
from shepherd.testing import wait_until
from support.postgres import OpenStore

pytestmark = pytest.mark.postgres


async def _events_when(store: PostgresStore, *, count: int) -> list[Event]:
    """Every event from the start, once `count` of them are delivered (polled, 30 s at most)."""
    found: list[Event] = []

    async def delivered() -> bool:
        found[:] = await store.read_events(reply_to=None, after_id=0)
        return len(found) >= count

    await wait_until(delivered, timeout=30, message=f"fewer than {count} events delivered")
    return found


@pytest.mark.timeout(60)
async def test_an_event_committed_first_waits_behind_an_older_open_transaction(
    postgres_url: str, open_store: OpenStore
) -> None:
    store = await open_store()
    async with await psycopg.AsyncConnection.connect(postgres_url) as held:
        # An older writer takes its event id and has not committed yet...
        await held.execute(
            "INSERT INTO events (task_id, kind, detail, at) VALUES ('held', 'note', '{}', now())"
        )
        # ...while a newer one commits an event with a higher id.
        await store.submit_task(NewTask(workflow="w", input=None))
        assert await store.read_events(reply_to=None, after_id=0) == []
        await held.commit()
    # Final once every older transaction in the cluster has ended (another
    # database's tests may hold one a moment): poll for both.
    events = await _events_when(store, count=2)
    assert events[0].task_id == "held"
    assert [e.kind for e in events] == ["note", "received"]
    assert [e.id for e in events] == sorted(e.id for e in events)


@pytest.mark.timeout(60)
async def test_a_transaction_left_open_does_not_block_other_writers(
    postgres_url: str, open_store: OpenStore
) -> None:
    store = await open_store()
    async with await psycopg.AsyncConnection.connect(postgres_url) as held:
        await held.execute(
            "INSERT INTO events (task_id, kind, detail, at) VALUES ('held', 'note', '{}', now())"
        )
        # With the old event-log lock this submit waited for `held` to end.
        submitted = await asyncio.wait_for(
            store.submit_task(NewTask(workflow="w", input=None)), timeout=30
        )
        assert submitted.created
        await held.rollback()


@pytest.mark.timeout(120)
async def test_many_concurrent_writers_never_make_a_tailing_reader_skip(
    postgres_url: str, open_store: OpenStore
) -> None:
    writers: list[PostgresStore] = [await open_store() for _ in range(6)]
    reader = await open_store()
    per_writer = 150
    seen: list[int] = []
    done = asyncio.Event()

    async def write(store: PostgresStore, n: int) -> None:
        for i in range(per_writer):
            # Small groups at once: the group committer batches them per writer.
            await asyncio.gather(
                *(
                    store.submit_task(NewTask(workflow="w", input={"n": n, "i": i, "j": j}))
                    for j in range(3)
                )
            )

    expected = len(writers) * per_writer * 3

    async def tail() -> None:
        cursor = 0
        # Until every writer is done and every event was read (or the test times out).
        while not (done.is_set() and len(seen) >= expected):
            for event in await reader.read_events(reply_to=None, after_id=cursor):
                seen.append(event.id)
                cursor = event.id

    tailer = asyncio.create_task(tail())
    await asyncio.gather(*(write(s, n) for n, s in enumerate(writers)))
    done.set()
    await asyncio.wait_for(tailer, timeout=60)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        cursor = await conn.execute("SELECT id FROM events ORDER BY id")
        stored = [int(row[0]) for row in await cursor.fetchall()]
    assert len(stored) == expected
    assert len(seen) == len(set(seen)), "the tailing reader was given an event twice"
    assert sorted(seen) == stored, "the tailing reader skipped events"


@pytest.mark.timeout(60)
async def test_a_cursor_whose_event_was_purged_goes_on_from_the_higher_ids(
    postgres_url: str, open_store: OpenStore
) -> None:
    store = await open_store()
    for n in range(4):
        await store.submit_task(NewTask(workflow="w", input={"n": n}))
    events = await _events_when(store, count=4)
    cursor = events[1].id
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("DELETE FROM events WHERE id <= %s", (cursor,))
    after = await store.read_events(reply_to=None, after_id=cursor)
    assert [e.id for e in after] == [e.id for e in events[2:]]
