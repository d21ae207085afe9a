"""What an idle worker asks SQLite every scan reads a few rows, however many tasks sleep.

SQLite only. With thousands of tasks asleep (pending, due later), the
supervisor still asks each interval for the next task deadline and for the
tasks past theirs, and the scheduler peeks, claims and asks when the next task
is due. SQLite's planner took `tasks_state` for all of them and read (then
sorted) every pending task: most of an idle worker's CPU with 10,000 asleep.
They read the partial indexes `tasks_deadline` (only tasks with a deadline)
and `tasks_claimable` (in `not_before` order: the due ones come first, and
the read stops at the limit). The scan for expired claims reads
`tasks_locked_by`: the running tasks only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.store.sql import leases
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite import tasks as sqlite_tasks

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


async def _plan(tmp_path: Path, template: str, params: Sequence[object]) -> str:
    store = SQLiteStore(f"sqlite:///{tmp_path}/plans.db", synchronous="NORMAL")
    await store.open()
    try:
        conn = store._conn
        assert conn is not None
        rows = conn.execute("EXPLAIN QUERY PLAN " + SQLITE.sql(template), params)
        return " ".join(str(row[3]) for row in rows)
    finally:
        await store.close()


async def test_the_next_deadline_is_read_from_the_deadline_index(tmp_path: Path) -> None:
    plan = await _plan(tmp_path, leases._NEXT_DEADLINE, ())

    assert "USING INDEX tasks_deadline" in plan


async def test_the_tasks_past_their_deadline_are_read_from_the_deadline_index(
    tmp_path: Path,
) -> None:
    plan = await _plan(tmp_path, leases._OVERDUE, (0.0, 100))

    assert "USING INDEX tasks_deadline" in plan
    assert "TEMP B-TREE" not in plan  # in deadline order already


async def test_expired_claims_are_read_from_the_running_tasks(tmp_path: Path) -> None:
    plan = await _plan(tmp_path, leases._EXPIRED, (0.0, 100))

    assert "USING INDEX tasks_locked_by" in plan


async def test_peeks_claims_and_the_next_due_read_the_claimable_tasks_in_order(
    tmp_path: Path,
) -> None:
    peek = await _plan(tmp_path, sqlite_tasks._PEEK, (0.0, 4))
    claim = await _plan(tmp_path, sqlite_tasks._CLAIM, ("s1", 0.0, 0.0, 0.0, 256))
    skipping = sqlite_tasks._CLAIM_SKIPPING.replace("{marks}", "?")
    claim_skipping = await _plan(tmp_path, skipping, ("s1", 0.0, 0.0, 0.0, "t1", 256))
    due = await _plan(tmp_path, sqlite_tasks._NEXT_DUE, ())

    for plan in (peek, claim, claim_skipping, due):
        assert "USING INDEX tasks_claimable" in plan, plan
        assert "TEMP B-TREE" not in plan, plan  # in not_before order already
