"""The writer's statements keep finding their rows through indexes once their tables grow.

psycopg prepares a statement after its fifth run, and PostgreSQL then caches a
generic plan for it. Cached while `tasks` held a handful of rows, that plan read
the whole table (one page read in order is cheaper than an index), and it stayed
for as long as the connection lived: W6 at 300 workflows/s on a fresh database
showed the writer's statements scanning `tasks` and `steps` whole in nearly
every execution. Here the plans are cached on nearly empty tables, `tasks`
grows to thousands of rows (autovacuum kept off, so no ANALYZE replans them),
and a further round of a workflow's writes must read far fewer rows of it than
it holds. A work count, not a timing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.store.contract import NewTask
from shepherd.testing import wait_until
from support.factories import step_start
from support.postgres import without_autovacuum

if TYPE_CHECKING:
    from shepherd.store.postgres import PostgresStore
    from support.postgres import OpenStore

pytestmark = pytest.mark.postgres

#: Rounds of writes run while the tables are nearly empty (more than psycopg's five).
ROUNDS = 8
#: Tasks in each round.
EACH = 2
#: Tasks added at once afterwards.
GROWTH = 3000


async def a_round_of_writes(store: PostgresStore, owner: str) -> None:
    """Tasks submitted, claimed, a step started, its request taken, answered, recorded."""
    await store.submit_tasks([NewTask(workflow="wf", input={"n": n}) for n in range(EACH)])
    tasks = await store.claim_tasks(locked_by=owner, limit=EACH)
    assert len(tasks) == EACH
    for task in tasks:
        await store.start_step(step_start(task, seq=1, agent="a"))
    requests = await store.take_requests(agents=["a"], worker="w", limit=EACH)
    assert len(requests) == EACH
    for request in requests:
        assert await store.reply_and_ack(request, worker="w", ok=True, body=None)
    assert len(await store.record_replies(locked_by=owner, limit=EACH)) == EACH


async def table_stats(url: str) -> tuple[int, int]:
    """Rows inserted into `tasks`, and rows read from it by sequential scans."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT n_tup_ins, seq_tup_read FROM pg_stat_user_tables WHERE relname = 'tasks'"
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


async def flushed(url: str, store: PostgresStore, inserted: int) -> int:
    """`tasks`'s sequential reads, once the server's statistics show `inserted` rows.

    A backend sends its counters together, at the end of a transaction a second
    or more after it last sent them: so each look that does not see them yet
    writes a marker task, whose commit sends them once that second has passed.
    Once the last write's insert shows, so do the reads of every statement before it.
    """
    reads = 0

    async def shown() -> bool:
        nonlocal reads
        rows, reads = await table_stats(url)
        if rows < inserted:
            await store.submit_tasks([NewTask(workflow="marker", input={})])
        return rows >= inserted

    await wait_until(shown, timeout=30, interval=0.1, message="statistics never showed the writes")
    return reads


@pytest.mark.timeout(120)
async def test_plans_cached_on_a_nearly_empty_table_do_not_read_it_whole_once_it_grows(
    postgres_url: str, open_store: OpenStore
) -> None:
    store: PostgresStore = await open_store()
    await without_autovacuum(postgres_url)
    for n in range(ROUNDS):
        await a_round_of_writes(store, f"s{n}")
    await store.submit_tasks([NewTask(workflow="big", input={"n": n}) for n in range(GROWTH)])
    before = await flushed(postgres_url, store, ROUNDS * EACH + GROWTH)
    inserted, _ = await table_stats(postgres_url)

    await a_round_of_writes(store, "last")
    after = await flushed(postgres_url, store, inserted + EACH)

    assert after - before < GROWTH, f"the round read {after - before} rows of tasks in order"
