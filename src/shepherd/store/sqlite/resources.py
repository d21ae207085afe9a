"""Batch handlers and reads for resources, partitions and entity assignments, on SQLite.

The operations are written once, in `shepherd.store.resource_writes`; here
they run in SQLite's dialect. A handler checks what exists and writes under the
transaction's write lock (BEGIN IMMEDIATE), so no other process changes the
mapping between its check and its write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from shepherd.store.move_writes import MOVE_PLANS
from shepherd.store.resource_writes import READ_PLANS, WRITE_PLANS, Plans, Statements
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import tuples

if TYPE_CHECKING:
    from shepherd.store.resource_writes import ReadPlan, WritePlan
    from shepherd.store.sqlite.batch import SqliteBatch

__all__: list[str] = []

_SQL = Statements.of(
    "?",
    json_param="?",
    text_param="?",
    info="info",
    later="? + ?",
    step_partition="json_extract(s.resolution, '$.partition')",
    step_resource="json_extract(s.resolution, '$.resource.name')",
)


def _writes(
    plan: WritePlan,
) -> Callable[..., list[object]]:
    def handle(batch: SqliteBatch, ops: Sequence[object]) -> list[object]:
        plans = Plans(plan, ops, batch, _SQL)
        cursor = tuples(batch.conn)
        for query in plans:
            plans.answer(cursor.execute(query.sql, query.params).fetchall())
        return plans.outcomes

    return handle


def _reads(plan: ReadPlan) -> Callable[[Reading, Any], object]:
    def handle(at: Reading, op: object) -> object:
        query, outcome = plan(op, _SQL)
        return outcome(tuples(at.conn).execute(query.sql, query.params).fetchall())

    return handle


for _op, _write in {**WRITE_PLANS, **MOVE_PLANS}.items():
    WRITES.handles(_op)(_writes(_write))
for _op, _read in READ_PLANS.items():
    READS.handles(_op)(_reads(_read))
