"""The hot statements stay proportional to their rows after an ANALYZE of empty queues.

autovacuum analyzes the queue tables between bursts, when they are empty, and
the planner then believes them empty: joined the wrong way round, a take of a
few thousand requests ran its locking sub-select once per row (seconds; W2
fell from about 1,100 to 125 workflows/s). Here a first burst of 600 tasks
leaves the queues empty, VACUUM ANALYZE runs, then 600 more are claimed with a
step each, and every statement of a step's
round trip is run under `EXPLAIN ANALYZE` (rolled back): the rows its plan
touches, over every node and loop, stay within a small multiple of the rows it
works on. A work count, not a timing. (The slow plan itself appeared on a
database that had run tens of thousands of tasks; this small one does not
bring the planner there, so the test guards the statements' shape rather than
replaying that plan.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from shepherd.store.contract import NewTask
from shepherd.store.postgres import effects, queues, steps
from support.factories import step_start
from support.postgres import without_autovacuum

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.postgres import PostgresStore
    from support.postgres import OpenStore

pytestmark = pytest.mark.postgres

N = 600
BURSTS = 2
#: Rows a plan may touch per row it works on (index look-ups, joins, the RETURNING).
PER_ROW = 12


def touched(plan: dict[str, Any]) -> int:
    """Rows produced and filtered out by every node, over all its loops."""
    rows = int(plan.get("Actual Rows", 0)) * int(plan.get("Actual Loops", 1))
    rows += int(plan.get("Rows Removed by Filter", 0)) + int(
        plan.get("Rows Removed by Join Filter", 0)
    )
    return rows + sum(touched(child) for child in plan.get("Plans", []))


async def work(url: str, sql: str, params: tuple[object, ...]) -> int:
    """The rows `sql` touches under EXPLAIN ANALYZE, in a transaction rolled back."""
    async with (
        await psycopg.AsyncConnection.connect(url) as conn,
        conn.transaction(force_rollback=True),
    ):
        # As the store runs its statements once prepared: with a generic plan.
        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor = await conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        row = await cursor.fetchone()
        assert row is not None
        document = row[0] if isinstance(row[0], list) else json.loads(row[0])
        return touched(document[0]["Plan"])


async def analyze(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("VACUUM ANALYZE")


async def claimed_with_a_step(store: PostgresStore, owner: str) -> list[Task]:
    """N new tasks claimed by `owner`, each with its first step sent."""
    await store.submit_tasks([NewTask(workflow="wf", input={"n": n}) for n in range(N)])
    tasks = await store.claim_tasks(locked_by=owner, limit=N)
    assert len(tasks) == N
    for task in tasks:
        await store.start_step(step_start(task, seq=1, agent="a"))
    return tasks


@pytest.mark.timeout(120)
async def test_a_steps_round_trip_touches_rows_in_proportion(
    postgres_url: str, open_store: OpenStore
) -> None:
    store: PostgresStore = await open_store()
    await without_autovacuum(postgres_url)
    # Bursts go through and leave the queues empty; then autovacuum's ANALYZE.
    for burst in range(BURSTS):
        await claimed_with_a_step(store, f"s0-{burst}")
        requests = await store.take_requests(agents=["a"], worker="w0", limit=N)
        for request in requests:
            assert await store.reply_and_ack(request, worker="w0", ok=True, body=None)
        assert len(await store.record_replies(locked_by=f"s0-{burst}", limit=N)) == N
    await analyze(postgres_url)
    tasks = await claimed_with_a_step(store, "s1")
    now = store.now()

    take = ("w1", now, now, ["a"], now, now, ["a"], now, now, 0, N)
    assert await work(postgres_url, queues._TAKE, take) <= PER_ROW * N

    requests = await store.take_requests(agents=["a"], worker="w1", limit=N)
    ack = (
        [r.id for r in requests],
        ["w1"] * N,
        [r.task_id for r in requests],
        [r.seq for r in requests],
        [r.attempt for r in requests],
        now,
    )
    assert await work(postgres_url, queues._ACK, ack) <= PER_ROW * N
    # Recording where the reply is made locks the replies' tasks and reads their steps.
    owners = ([r.task_id for r in requests], [r.seq for r in requests])
    assert await work(postgres_url, queues._LOCK_STEP_OWNERS, owners) <= PER_ROW * N

    for request in requests:
        assert await store.reply_and_ack(request, worker="w1", ok=True, body=None)
    assert await work(postgres_url, steps._TAKE_REPLIES, ("s1", N)) <= PER_ROW * N

    ids = [t.id for t in tasks]
    record = (ids, [1] * N, ["null"] * N, "completed", now)
    assert await work(postgres_url, steps._COMPLETED, record) <= PER_ROW * N
    touch = (ids, [t.lock_epoch for t in tasks], ["s1"] * N, [now] * N)
    assert await work(postgres_url, steps._TOUCH_CLAIMS, touch) <= PER_ROW * N
    each = (
        ids, [t.lock_epoch for t in tasks], ["s1"] * N, ["processed"] * N, [True] * N,
        [1] * N, [None] * N, [None] * N, [None] * N, [None] * N, [None] * N, [None] * N, now,
    )  # fmt: skip
    assert await work(postgres_url, effects.UPDATE_EACH, each) <= PER_ROW * N
