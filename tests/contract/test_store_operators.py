"""Operators' named tokens (only a hash stored), who retried or cancelled, and the overview's reads."""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, OperatorExistsError, UnknownOperatorError
from shepherd.store.ops.operators import TOUCH_EVERY
from shepherd.store.sqlite import path_from_url
from support.factories import claimed_task, leadership, new_task, snapshot

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores


async def _stored_rows(stores: Stores) -> list[tuple[Any, ...]]:
    """Every operators row, as the database holds it."""
    query = "SELECT name, token_hash FROM operators ORDER BY name"
    if stores.url.startswith("sqlite"):
        with closing(sqlite3.connect(path_from_url(stores.url))) as conn:
            return [tuple(r) for r in conn.execute(query).fetchall()]
    async with await psycopg.AsyncConnection.connect(stores.url) as conn:
        return [tuple(r) for r in await (await conn.execute(query)).fetchall()]


async def test_a_token_is_stored_as_its_hash_only_and_names_its_operator(
    store: Store, stores: Stores
) -> None:
    alice = await store.add_operator("alice")
    bob = await store.add_operator("bob.ops@example-1")

    assert len(alice) >= 40
    assert alice != bob
    assert await store.authenticate(alice) == "alice"
    assert await store.authenticate(bob) == "bob.ops@example-1"
    rows = await _stored_rows(stores)
    assert rows == [
        ("alice", hashlib.sha256(alice.encode()).hexdigest()),
        ("bob.ops@example-1", hashlib.sha256(bob.encode()).hexdigest()),
    ]
    assert all(alice not in str(row) and bob not in str(row) for row in rows)


@pytest.mark.parametrize("token", ["", "x", "a" * 43, "a" * 10_000, "\0", "\ud800", None, 7])
async def test_anything_but_a_token_authenticates_no_one(store: Store, token: Any) -> None:
    await store.add_operator("alice")
    assert await store.authenticate(token) is None


async def test_a_removed_operator_s_token_opens_nothing(store: Store) -> None:
    token = await store.add_operator("alice")
    await store.remove_operator("alice")

    assert await store.authenticate(token) is None
    assert await store.list_operators() == []


async def test_names_are_checked_and_unique(store: Store, stores: Stores) -> None:
    await store.add_operator("alice")

    with pytest.raises(OperatorExistsError, match="exists already"):
        await store.add_operator("alice")
    for bad in ("", " alice", "al ice", "-x", "a" * 65, "é", "a\0", "a/b"):
        with pytest.raises(ConfigError) as caught:
            await store.add_operator(bad)
        assert caught.value.field == "name"
    with pytest.raises(UnknownOperatorError, match="no operator is named 'bob'"):
        await store.remove_operator("bob")
    assert [name for name, _ in await _stored_rows(stores)] == ["alice"]


async def test_operators_are_listed_by_name_with_their_last_use(
    store: Store, fake_clock: FakeClock
) -> None:
    start = fake_clock.now()
    token = await store.add_operator("zoe")
    await store.add_operator("adam")
    fake_clock.advance(30)

    assert await store.authenticate(token) == "zoe"
    listed = await store.list_operators()
    assert [(o.name, o.created_at, o.last_used_at) for o in listed] == [
        ("adam", start, None),
        ("zoe", start, start + timedelta(seconds=30)),
    ]
    # A session's every request authenticates: last use moves at most once a minute.
    fake_clock.advance(TOUCH_EVERY.total_seconds() - 1)
    await store.authenticate(token)
    assert (await store.list_operators())[1].last_used_at == start + timedelta(seconds=30)
    fake_clock.advance(1)
    await store.authenticate(token)
    assert (await store.list_operators())[1].last_used_at == fake_clock.now()


async def test_retry_and_cancel_record_who_did_it(store: Store) -> None:
    task = await claimed_task(store)
    await store.fail_task(
        task.id, locked_by="s1", epoch=task.lock_epoch, state=ProcessState.ERROR, error={"m": "x"}
    )
    await store.retry_task(task.id, by="alice")
    await store.cancel_task(task.id, by=" bob ")
    plain = (await store.submit_task(new_task("wf"))).task_id
    await store.cancel_task(plain)

    details = [(e.kind, e.detail) for e in await store.task_events(task.id)]
    assert ("retried", {"seq": None, "state": "pending", "by": "alice"}) in details
    assert ("cancel_requested", {"by": "bob"}) in details
    assert [e.detail for e in await store.task_events(plain) if e.kind == "cancel_requested"] == [
        {}
    ]


@pytest.mark.parametrize("by", ["", "   ", "a\nb", "x" * 801, 5])
async def test_a_bad_by_is_refused_and_changes_nothing(store: Store, by: Any) -> None:
    task_id = (await store.submit_task(new_task("wf"))).task_id
    before = await snapshot(store, task_id)

    with pytest.raises(ConfigError) as caught:
        await store.cancel_task(task_id, by=by)
    with pytest.raises(ConfigError):
        await store.retry_task(task_id, by=by)

    assert caught.value.field == "by"
    assert await snapshot(store, task_id) == before


async def test_the_lease_is_read_as_stored(store: Store, fake_clock: FakeClock) -> None:
    assert await store.get_lease("supervisor") is None
    lease = await leadership(store, holder="sup-1", ttl=10)

    assert await store.get_lease("supervisor") == lease
    fake_clock.advance(20)  # expired: still read, the caller decides
    assert await store.get_lease("supervisor") == lease
    assert await store.get_lease("other") is None


async def test_ended_tasks_are_counted_by_slice_and_state(
    store: Store, fake_clock: FakeClock
) -> None:
    since = fake_clock.now()
    ended: list[tuple[int, ProcessState]] = []
    for slice_index, state in (
        (0, ProcessState.PROCESSED),
        (0, ProcessState.PROCESSED),
        (0, ProcessState.ERROR),
        (2, ProcessState.COMPENSATED),
        (2, ProcessState.PROCESSED),
    ):
        fake_clock.set(since + timedelta(seconds=60 * slice_index + 5))
        task = await claimed_task(store)
        if state is ProcessState.PROCESSED:
            await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=1)
        else:
            await store.fail_task(
                task.id, locked_by="s1", epoch=task.lock_epoch, state=state, error={"m": "x"}
            )
        ended.append((slice_index, state))
    cancelled = (await store.submit_task(new_task("wf"))).task_id
    await store.cancel_task(cancelled)  # compensating: not ended yet
    await store.submit_task(new_task("wf"))  # pending

    counts = await store.ended_counts(since=since, bucket=60.0)

    assert counts == {
        (0, ProcessState.PROCESSED): 2,
        (0, ProcessState.ERROR): 1,
        (2, ProcessState.COMPENSATED): 1,
        (2, ProcessState.PROCESSED): 1,
    }
    assert await store.ended_counts(since=fake_clock.now() + timedelta(seconds=1), bucket=60) == {}
