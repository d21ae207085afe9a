"""What each resource, partition and assignment operation reads and writes, written once for both backends.

An operation is a plan: a generator that yields its statements (`Query`) one
at a time and is sent each one's rows, so what it checks decides what it
writes next. A backend only runs the statements, in its dialect
(`Statements.of`), under its lock on the mapping; `Plans` runs a batch's
operations one after another, as if applied one by one. Each operation that
changes something bumps the resolver's version once and rings RESOLVER; a
refused one has written nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, final

from shepherd.core.moves import MOST_REPORTED
from shepherd.errors import (
    PartitionMovingError,
    ResourceExistsError,
    ResourceInUseError,
    UnknownPartitionError,
    UnknownResourceError,
)
from shepherd.store import signals as ch
from shepherd.store.ops import (
    AddResource,
    AssignEntity,
    DeclareResource,
    ListPartitions,
    ListResources,
    MovePartition,
    RemoveResource,
    Resolve,
    ResolverVersion,
    SetResource,
    UnassignEntity,
)
from shepherd.store.resource_rows import (
    PARTITION_COLUMNS,
    RESOLVER,
    partition_from_row,
    resolution_from_row,
    resource_from_row,
)

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue
    from shepherd.core.resources import Resource

__all__ = [
    "READ_PLANS",
    "WRITE_PLANS",
    "Plan",
    "Plans",
    "ReadPlan",
    "Statements",
    "WritePlan",
    "Writing",
]


class Query(NamedTuple):
    """A statement, its parameters, and whether the plan reads its rows.

    A backend may send a statement whose rows are not read without waiting for
    it (PostgreSQL's pipeline).
    """

    sql: str
    params: tuple[object, ...] = ()
    rows: bool = True


#: A statement's rows, as tuples (none for a write).
Rows: TypeAlias = Sequence[Sequence[object]]
#: One operation's statements, each sent its rows; it returns the operation's outcome.
Plan: TypeAlias = Generator[Query, Rows, object]
#: What the plan of a write is made of: (operation, batch, statements) -> its plan.
WritePlan: TypeAlias = "Callable[[Any, Writing, Statements], Plan]"
#: A read: (operation, statements) -> its one statement, and what makes its outcome of the rows.
ReadPlan: TypeAlias = "Callable[[Any, Statements], tuple[Query, Callable[[Rows], object]]]"


class Writing(Protocol):
    """What a plan needs of a backend's `Batch`."""

    rings: set[str]

    @property
    def now(self) -> object:
        """The batch's instant, in the backend's type."""
        ...

    def encode(self, value: JsonValue) -> str | Exception:
        """Encode a payload, or the error that refuses it."""
        ...


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Statements:
    """The statements of the resource operations, in one backend's dialect."""

    version: str
    bump: str
    insert: str
    get: str
    update: str
    users: str
    delete: str
    resources: str
    partition_of: str
    put_partition: str
    partition: str
    partitions: str
    entity: str
    assign: str
    unassign: str
    resolve: str
    move_state: str
    in_flight: str
    drain: str
    undrain: str

    @classmethod
    def of(
        cls,
        param: str,
        *,
        json_param: str,
        text_param: str,
        info: str,
        later: str,
        step_partition: str,
        step_resource: str,
    ) -> Statements:
        """The statements with `param` for a parameter.

        Args:
            param: A parameter (`?`, `%s`).
            json_param: A parameter written to a JSON column.
            text_param: A text parameter whose type the query does not tell.
            info: The info column read back as JSON text.
            later: An instant (a parameter) plus seconds (a parameter).
            step_partition: A step's recorded resolution's partition, as text.
            step_resource: A step's recorded resolution's resource name, as text.
        """
        p = param
        columns = f"name, kind, {info}, capacity, rate"
        partitions = (
            f"SELECT {PARTITION_COLUMNS} FROM partitions p "
            "LEFT JOIN entity_partitions e ON e.partition = p.name "
        )
        upsert = "ON CONFLICT ({}) DO UPDATE SET {} = excluded.{}, updated_at = excluded.updated_at"
        return cls(
            version=f"SELECT version FROM store_versions WHERE name = '{RESOLVER}'",
            bump=f"UPDATE store_versions SET version = version + 1 WHERE name = '{RESOLVER}'",
            insert=(
                "INSERT INTO resources (name, kind, info, capacity, rate, created_at, updated_at) "
                f"VALUES ({p}, {p}, {json_param}, {p}, {p}, {p}, {p}) "
                "ON CONFLICT (name) DO NOTHING RETURNING name"
            ),
            get=f"SELECT {columns} FROM resources WHERE name = {p}",
            update=(
                f"UPDATE resources SET kind = {p}, info = {json_param}, capacity = {p}, "
                f"rate = {p}, updated_at = {p} WHERE name = {p}"
            ),
            users=f"SELECT name FROM partitions WHERE resource = {p} ORDER BY name",
            delete=f"DELETE FROM resources WHERE name = {p}",
            resources=f"SELECT {columns} FROM resources ORDER BY name",
            partition_of=f"SELECT resource FROM partitions WHERE name = {p}",
            # A partition put on a resource is no longer being moved.
            put_partition=(
                f"INSERT INTO partitions (name, resource, updated_at) VALUES ({p}, {p}, {p}) "
                + upsert.format("name", "resource", "resource")
                + ", moving_to = NULL, move_holder = NULL, move_until = NULL"
            ),
            partition=f"{partitions}WHERE p.name = {p} GROUP BY p.name, p.resource",
            partitions=f"{partitions}GROUP BY p.name, p.resource ORDER BY p.name",
            entity=f"SELECT partition FROM entity_partitions WHERE entity = {p}",
            assign=(
                f"INSERT INTO entity_partitions (entity, partition, updated_at) "
                f"VALUES ({p}, {p}, {p}) " + upsert.format("entity", "partition", "partition")
            ),
            unassign=f"DELETE FROM entity_partitions WHERE entity = {p}",
            # One statement (one snapshot), so the answer and the version are read
            # together: the entity's partition (or the default one), its resource.
            resolve=(
                "SELECT v.version, p.name, p.moving_to, p.move_until, "
                f"r.name, r.kind, r.{info}, r.capacity, r.rate "
                "FROM store_versions v "
                "LEFT JOIN partitions p ON p.name = coalesce("
                f"(SELECT partition FROM entity_partitions WHERE entity = {p}), {text_param}) "
                "LEFT JOIN resources r ON r.name = p.resource "
                f"WHERE v.name = '{RESOLVER}'"
            ),
            # The partition's resource and its move (1 if its lease runs at the instant given).
            move_state=(
                "SELECT resource, moving_to, move_holder, "
                f"CASE WHEN move_until > {p} THEN 1 ELSE 0 END FROM partitions WHERE name = {p}"
            ),
            # The steps sent, with no outcome yet, resolved to the partition on the
            # resource: a running step of a task that has not ended.
            in_flight=(
                "SELECT s.task_id, s.seq, s.agent, s.attempt FROM tasks t "
                "JOIN steps s ON s.task_id = t.id "
                "WHERE t.process_state IN ('pending', 'processing', 'compensating') "
                "AND s.state = 'running' AND s.resolution IS NOT NULL "
                f"AND {step_partition} = {p} AND {step_resource} = {p} "
                f"ORDER BY s.task_id, s.seq LIMIT {MOST_REPORTED}"
            ),
            drain=(
                f"UPDATE partitions SET moving_to = {p}, move_holder = {p}, "
                f"move_until = {later} WHERE name = {p}"
            ),
            undrain=(
                "UPDATE partitions SET moving_to = NULL, move_holder = NULL, move_until = NULL "
                f"WHERE name = {p} AND move_holder = {p} RETURNING name"
            ),
        )


@final
class Plans:
    """A batch's operations of one type, run one after another.

    Iterate over it for the statements to run, `answer` each with its rows,
    then read `outcomes`: per operation, in order, its outcome or its error.
    """

    __slots__ = ("_batch", "_ops", "_plan", "_rows", "_sql", "outcomes")

    def __init__(
        self,
        plan: WritePlan,
        ops: Sequence[object],
        batch: Writing,
        sql: Statements,
    ) -> None:
        self._plan, self._ops, self._batch, self._sql = plan, ops, batch, sql
        self._rows: Rows = ()
        self.outcomes: list[object] = []

    def __iter__(self) -> Iterator[Query]:
        for op in self._ops:
            steps = self._plan(op, self._batch, self._sql)
            try:
                query = next(steps)
                while True:
                    yield query
                    query = steps.send(self._rows)
            except StopIteration as done:
                self.outcomes.append(done.value)

    def answer(self, rows: Rows) -> None:
        """The rows of the statement just yielded."""
        self._rows = rows


def _write(batch: Writing, sql: Statements, query: str, params: tuple[object, ...]) -> Plan:
    """Run the change `query`, then bump the resolver's version."""
    yield Query(query, params, rows=False)
    yield from _bump(batch, sql)
    return None


def _bump(batch: Writing, sql: Statements) -> Plan:
    """Bump the resolver's version; RESOLVER rings at commit."""
    yield Query(sql.bump, rows=False)
    batch.rings.add(ch.RESOLVER)
    return None


def _text(rows: Rows) -> str | None:
    """The first row's one column as text, or None if there is no row."""
    return None if not rows else str(rows[0][0])


def _get(sql: Statements, name: str) -> Generator[Query, Rows, Resource | None]:
    rows = yield Query(sql.get, (name,))
    return None if not rows else resource_from_row(rows[0])


def _insert(batch: Writing, sql: Statements, resource: Resource) -> Plan:
    """Insert `resource` unless its name is taken: whether it did, or why its info was refused."""
    info = batch.encode(resource.info)
    if isinstance(info, Exception):
        return info
    r, now = resource, batch.now
    if not (yield Query(sql.insert, (r.name, r.kind, info, r.capacity, r.rate, now, now))):
        return False
    yield from _bump(batch, sql)
    return True


# -- writes --------------------------------------------------------------------
def declare(op: DeclareResource, batch: Writing, sql: Statements) -> Plan:
    """Insert the resource if its name is free; never overwrite one (an operator's change stays)."""
    return (yield from _insert(batch, sql, op.resource))


def add(op: AddResource, batch: Writing, sql: Statements) -> Plan:
    """Insert the resource; ResourceExistsError if its name is taken."""
    inserted = yield from _insert(batch, sql, op.resource)
    if inserted is True:
        return op.resource
    return inserted or ResourceExistsError(op.resource.name)


def set_resource(op: SetResource, batch: Writing, sql: Statements) -> Plan:
    """Change the given fields of the resource; UnknownResourceError if it does not exist."""
    old = yield from _get(sql, op.name)
    if old is None:
        return UnknownResourceError(op.name)
    new = op.change.applied_to(old)
    if new != old:
        info = batch.encode(new.info)
        if isinstance(info, Exception):
            return info
        params = (new.kind, info, new.capacity, new.rate, batch.now, new.name)
        yield from _write(batch, sql, sql.update, params)
    return new


def remove(op: RemoveResource, batch: Writing, sql: Statements) -> Plan:
    """Delete the resource unless a partition lives on it."""
    old = yield from _get(sql, op.name)
    if old is None:
        return UnknownResourceError(op.name)
    users = [str(name) for (name,) in (yield Query(sql.users, (op.name,)))]
    if users:
        return ResourceInUseError(op.name, users)
    yield from _write(batch, sql, sql.delete, (op.name,))
    return old


def move(op: MovePartition, batch: Writing, sql: Statements) -> Plan:
    """Put the partition on its resource (creating it); it, and the resource it was on or None.

    PartitionMovingError while a move that drains it is under way.
    """
    if (yield from _get(sql, op.resource)) is None:
        return UnknownResourceError(op.resource, partition=op.partition)
    state = yield Query(sql.move_state, (batch.now, op.partition))
    if state and state[0][3]:
        return PartitionMovingError(op.partition, str(state[0][1]))
    before = None if not state else str(state[0][0])
    if before != op.resource:
        yield from _write(batch, sql, sql.put_partition, (op.partition, op.resource, batch.now))
    # Written above, or there before, under the lock: one row.
    rows = yield Query(sql.partition, (op.partition,))
    return partition_from_row(rows[0]), before


def assign(op: AssignEntity, batch: Writing, sql: Statements) -> Plan:
    """Map the entity to its partition; the partition it was in, or None."""
    if not (yield Query(sql.partition_of, (op.partition,))):
        return UnknownPartitionError(op.partition, entity=op.entity)
    before = _text((yield Query(sql.entity, (op.entity,))))
    if before != op.partition:
        yield from _write(batch, sql, sql.assign, (op.entity, op.partition, batch.now))
    return before


def unassign(op: UnassignEntity, batch: Writing, sql: Statements) -> Plan:
    """Forget the entity's partition; the partition it was in, or None."""
    before = _text((yield Query(sql.entity, (op.entity,))))
    if before is not None:
        yield from _write(batch, sql, sql.unassign, (op.entity,))
    return before


#: Operation type -> its plan.
WRITE_PLANS: dict[type[Any], WritePlan] = {
    DeclareResource: declare,
    AddResource: add,
    SetResource: set_resource,
    RemoveResource: remove,
    MovePartition: move,
    AssignEntity: assign,
    UnassignEntity: unassign,
}


# -- reads ---------------------------------------------------------------------
def _resources(op: ListResources, sql: Statements) -> tuple[Query, Callable[[Rows], object]]:
    """Every resource, by name."""
    return Query(sql.resources), lambda rows: [resource_from_row(row) for row in rows]


def _partitions(op: ListPartitions, sql: Statements) -> tuple[Query, Callable[[Rows], object]]:
    """Every partition, by name, with its resource and entity count."""
    return Query(sql.partitions), lambda rows: [partition_from_row(row) for row in rows]


def _resolve(op: Resolve, sql: Statements) -> tuple[Query, Callable[[Rows], object]]:
    """Where the entity lives (or the default partition), and the version read with it."""
    query = Query(sql.resolve, (op.entity, op.default_partition))
    return query, lambda rows: resolution_from_row(op.entity, rows[0])


def _version(op: ResolverVersion, sql: Statements) -> tuple[Query, Callable[[Rows], object]]:
    """The mapping's version."""
    return Query(sql.version), lambda rows: int(rows[0][0])


#: Read operation type -> (its one statement, what makes its outcome of the rows).
READ_PLANS: dict[type[Any], ReadPlan] = {
    ListResources: _resources,
    ListPartitions: _partitions,
    Resolve: _resolve,
    ResolverVersion: _version,
}
