"""Group commit: concurrent operations share transactions, each caller still gets its own outcome."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from shepherd.errors import PayloadError
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store

SUBMITS = 200


async def test_concurrent_submits_commit_in_fewer_transactions_than_operations(
    store: Store,
) -> None:
    before = store.statistics()

    submitted = await asyncio.gather(
        *(store.submit_task(new_task("wf", i)) for i in range(SUBMITS))
    )

    after = store.statistics()
    commits = after["commits"] - before["commits"]
    operations = after["operations"] - before["operations"]
    assert operations >= SUBMITS
    assert 1 <= commits < SUBMITS / 10
    assert len({s.task_id for s in submitted}) == SUBMITS
    assert len(await store.list_tasks(limit=1000)) == SUBMITS


async def test_one_bad_operation_fails_alone(store: Store) -> None:
    outcomes = await asyncio.gather(
        store.submit_task(new_task("wf", 1)),
        store.submit_task(new_task("wf", float("inf"))),
        store.submit_task(new_task("wf", 3)),
        return_exceptions=True,
    )

    assert isinstance(outcomes[1], PayloadError)
    assert not isinstance(outcomes[0], BaseException)
    assert not isinstance(outcomes[2], BaseException)
    assert sorted(t.input for t in await store.list_tasks()) == [1, 3]
