"""Batch handlers and reads for resources, partitions and entity assignments, on PostgreSQL.

The operations are written once, in `shepherd.store.resource_writes`; here
they run in PostgreSQL's dialect. Every handler first locks the resolver's
version row (`FOR UPDATE`): writes to the mapping take turns across processes,
so what a handler checks (does the resource exist, does a partition use it)
still holds when it writes. RESOLVER is NOTIFYed at commit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from shepherd.store.move_writes import MOVE_PLANS
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.resource_rows import RESOLVER
from shepherd.store.resource_writes import READ_PLANS, WRITE_PLANS, Plans, Statements

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader
    from shepherd.store.resource_writes import ReadPlan, WritePlan

__all__: list[str] = []

# info is read back as JSON text, as SQLite stores it.
_SQL = Statements.of(
    "%s",
    json_param="%s::jsonb",
    text_param="%s::text",
    info="info::text",
    later="%s + make_interval(secs => %s)",
    step_partition="(s.resolution::jsonb ->> 'partition')",
    step_resource="(s.resolution::jsonb #>> '{resource,name}')",
)
_LOCK = f"SELECT version FROM store_versions WHERE name = '{RESOLVER}' FOR UPDATE"


def _writes(
    plan: WritePlan,
) -> Callable[..., Awaitable[list[object]]]:
    async def handle(batch: PostgresBatch, ops: Sequence[object]) -> list[object]:
        await batch.scalar(_LOCK)
        plans = Plans(plan, ops, batch, _SQL)
        for query in plans:
            cursor = await batch.send(query.sql, query.params)
            plans.answer(await cursor.fetchall() if query.rows else ())
        return plans.outcomes

    return handle


def _reads(plan: ReadPlan) -> Callable[[Reader, Any], Awaitable[object]]:
    async def handle(reader: Reader, op: object) -> object:
        query, outcome = plan(op, _SQL)
        return outcome(await reader.fetch(query.sql, query.params))

    return handle


for _op, _write in {**WRITE_PLANS, **MOVE_PLANS}.items():
    WRITES.handles(_op)(_writes(_write))
for _op, _read in READ_PLANS.items():
    READS.handles(_op)(_reads(_read))
