"""A claim's touches are HOT updates: no index of `tasks` is written by them.

A running task's row is touched at every step's start and at every reply
(`complete_by` moved ahead). Were `complete_by` or `updated_at` indexed, each
touch would write a new entry in every index of the table (eleven); migration
0032 took the index on `complete_by` away and leaves room on each page, and a
touch does not write `updated_at`. PostgreSQL counts, per transaction, the
updates it made and how many of them were HOT: the store's two touch
statements run here in one transaction (rolled back) and every update they
make is HOT.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.store.contract import NewTask
from shepherd.store.postgres import steps
from support.factories import step_start
from support.postgres import without_autovacuum

if TYPE_CHECKING:
    from shepherd.store.postgres import PostgresStore
    from support.postgres import OpenStore

pytestmark = pytest.mark.postgres

N = 5
_COUNTS = (
    "SELECT pg_stat_get_xact_tuples_updated('tasks'::regclass), "
    "pg_stat_get_xact_tuples_hot_updated('tasks'::regclass)"
)
_INDEXED = (
    "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'tasks'::regclass "
    "AND pg_get_indexdef(indexrelid) ~ '\\mcomplete_by\\M'"
)


async def test_a_steps_start_and_a_reply_touch_the_task_without_writing_an_index(
    postgres_url: str, open_store: OpenStore
) -> None:
    store: PostgresStore = await open_store()
    await without_autovacuum(postgres_url)
    await store.submit_tasks([NewTask(workflow="wf", input={"n": n}) for n in range(N)])
    tasks = await store.claim_tasks(locked_by="s1", limit=N)
    assert len(tasks) == N
    for task in tasks:
        await store.start_step(step_start(task, seq=1, agent="a"))
    ids = [t.id for t in tasks]
    now = store.now()

    async with (
        await psycopg.AsyncConnection.connect(postgres_url) as conn,
        conn.transaction(force_rollback=True),
    ):
        assert await (await conn.execute(_INDEXED)).fetchall() == []
        # A step's start (the claim moved past its deadline), then a reply.
        touch = (ids, [t.lock_epoch for t in tasks], ["s1"] * N, [now] * N)
        await conn.execute(steps._TOUCH_CLAIMS, touch)
        await conn.execute(steps.TOUCH, (now, ids))
        counts = await (await conn.execute(_COUNTS)).fetchone()

    assert counts == (2 * N, 2 * N)
