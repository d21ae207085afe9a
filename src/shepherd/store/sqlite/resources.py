"""Batch handlers and reads for resources, partitions and entity assignments.

A handler checks what exists and writes under the transaction's write lock
(BEGIN IMMEDIATE), so no other process changes the mapping between its check
and its write. Each operation that changes something bumps the resolver's
version once and rings RESOLVER; a refused one has written nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.resources import Partition, Resolution, Resource
from shepherd.errors import (
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
    RESOURCE_COLUMNS,
    partition_from_row,
    resolution_from_row,
    resource_from_row,
)
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import tuples

if TYPE_CHECKING:
    import sqlite3

    from shepherd.store.sqlite.batch import Batch

__all__ = [
    "add",
    "assign",
    "declare",
    "list_partitions",
    "list_resources",
    "move",
    "remove",
    "resolve",
    "resolver_version",
    "set_resource",
    "unassign",
]

_BUMP = f"UPDATE store_versions SET version = version + 1 WHERE name = '{RESOLVER}'"
_VERSION = f"SELECT version FROM store_versions WHERE name = '{RESOLVER}'"
_INSERT = (
    "INSERT INTO resources (name, kind, info, capacity, rate, created_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING"
)
_GET = f"SELECT {RESOURCE_COLUMNS} FROM resources WHERE name = ?"
_UPDATE = (
    "UPDATE resources SET kind = ?, info = ?, capacity = ?, rate = ?, updated_at = ? WHERE name = ?"
)
_USERS = "SELECT name FROM partitions WHERE resource = ? ORDER BY name"
_DELETE = "DELETE FROM resources WHERE name = ?"
_LIST = f"SELECT {RESOURCE_COLUMNS} FROM resources ORDER BY name"
_PARTITION_OF = "SELECT resource FROM partitions WHERE name = ?"
_PUT_PARTITION = (
    "INSERT INTO partitions (name, resource, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET resource = excluded.resource, "
    "updated_at = excluded.updated_at"
)
_PARTITION = (
    f"SELECT {PARTITION_COLUMNS} FROM partitions p "
    "LEFT JOIN entity_partitions e ON e.partition = p.name WHERE p.name = ? "
    "GROUP BY p.name, p.resource"
)
_PARTITIONS = (
    f"SELECT {PARTITION_COLUMNS} FROM partitions p "
    "LEFT JOIN entity_partitions e ON e.partition = p.name "
    "GROUP BY p.name, p.resource ORDER BY p.name"
)
_ENTITY = "SELECT partition FROM entity_partitions WHERE entity = ?"
_ASSIGN = (
    "INSERT INTO entity_partitions (entity, partition, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (entity) DO UPDATE SET partition = excluded.partition, "
    "updated_at = excluded.updated_at"
)
_UNASSIGN = "DELETE FROM entity_partitions WHERE entity = ?"
# One statement, so the answer and the version are read together: the entity's
# partition (or the default one), its resource, and the version.
_RESOLVE = (
    "SELECT v.version, p.name, r.name, r.kind, r.info, r.capacity, r.rate "
    "FROM store_versions v "
    "LEFT JOIN partitions p ON p.name = coalesce("
    "(SELECT partition FROM entity_partitions WHERE entity = ?), ?) "
    "LEFT JOIN resources r ON r.name = p.resource "
    f"WHERE v.name = '{RESOLVER}'"
)


def _changed(batch: Batch) -> None:
    batch.conn.execute(_BUMP)
    batch.rings.add(ch.RESOLVER)


def _get(conn: sqlite3.Connection, name: str) -> Resource | None:
    row = tuples(conn).execute(_GET, (name,)).fetchone()
    return None if row is None else resource_from_row(row)


def _insert(batch: Batch, resource: Resource) -> bool | Exception:
    """Insert `resource` unless its name is taken: whether it did, or why its info was refused."""
    info = batch.encode(resource.info)
    if isinstance(info, Exception):
        return info
    r, now = resource, batch.now
    params = (r.name, r.kind, info, r.capacity, r.rate, now, now)
    if batch.conn.execute(_INSERT, params).rowcount != 1:
        return False
    _changed(batch)
    return True


@WRITES.handles(DeclareResource)
def declare(batch: Batch, ops: Sequence[DeclareResource]) -> list[object]:
    """Insert each resource whose name is free; never overwrite one (an operator's change stays)."""
    return [_insert(batch, op.resource) for op in ops]


@WRITES.handles(AddResource)
def add(batch: Batch, ops: Sequence[AddResource]) -> list[object]:
    """Insert each resource; ResourceExistsError if its name is taken."""
    out: list[object] = []
    for op in ops:
        inserted = _insert(batch, op.resource)
        if inserted is True:
            out.append(op.resource)
        else:
            out.append(inserted or ResourceExistsError(op.resource.name))
    return out


@WRITES.handles(SetResource)
def set_resource(batch: Batch, ops: Sequence[SetResource]) -> list[object]:
    """Change the given fields of each resource; UnknownResourceError if it does not exist."""
    out: list[object] = []
    for op in ops:
        old = _get(batch.conn, op.name)
        if old is None:
            out.append(UnknownResourceError(op.name))
            continue
        new = op.change.applied_to(old)
        if new != old:
            info = batch.encode(new.info)
            if isinstance(info, Exception):
                out.append(info)
                continue
            params = (new.kind, info, new.capacity, new.rate, batch.now, new.name)
            batch.conn.execute(_UPDATE, params)
            _changed(batch)
        out.append(new)
    return out


@WRITES.handles(RemoveResource)
def remove(batch: Batch, ops: Sequence[RemoveResource]) -> list[object]:
    """Delete each resource that no partition lives on."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        old = _get(conn, op.name)
        if old is None:
            out.append(UnknownResourceError(op.name))
            continue
        users = [name for (name,) in tuples(conn).execute(_USERS, (op.name,))]
        if users:
            out.append(ResourceInUseError(op.name, users))
            continue
        conn.execute(_DELETE, (op.name,))
        _changed(batch)
        out.append(old)
    return out


@WRITES.handles(MovePartition)
def move(batch: Batch, ops: Sequence[MovePartition]) -> list[object]:
    """Put each partition on its resource (creating it); the resource it was on, or None."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        if _get(conn, op.resource) is None:
            out.append(UnknownResourceError(op.resource, partition=op.partition))
            continue
        row = conn.execute(_PARTITION_OF, (op.partition,)).fetchone()
        before = None if row is None else str(row[0])
        if before != op.resource:
            conn.execute(_PUT_PARTITION, (op.partition, op.resource, batch.now))
            _changed(batch)
        found = tuples(conn).execute(_PARTITION, (op.partition,)).fetchone()
        out.append((partition_from_row(found), before))
    return out


@WRITES.handles(AssignEntity)
def assign(batch: Batch, ops: Sequence[AssignEntity]) -> list[object]:
    """Map each entity to its partition; the partition it was in, or None."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        if conn.execute(_PARTITION_OF, (op.partition,)).fetchone() is None:
            out.append(UnknownPartitionError(op.partition, entity=op.entity))
            continue
        row = conn.execute(_ENTITY, (op.entity,)).fetchone()
        before = None if row is None else str(row[0])
        if before != op.partition:
            conn.execute(_ASSIGN, (op.entity, op.partition, batch.now))
            _changed(batch)
        out.append(before)
    return out


@WRITES.handles(UnassignEntity)
def unassign(batch: Batch, ops: Sequence[UnassignEntity]) -> list[object]:
    """Forget each entity's partition; the partition it was in, or None."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        row = conn.execute(_ENTITY, (op.entity,)).fetchone()
        if row is not None:
            conn.execute(_UNASSIGN, (op.entity,))
            _changed(batch)
        out.append(None if row is None else str(row[0]))
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(ListResources)
def list_resources(at: Reading, op: ListResources) -> list[Resource]:
    """Every resource, by name."""
    return [resource_from_row(row) for row in tuples(at.conn).execute(_LIST)]


@READS.handles(ListPartitions)
def list_partitions(at: Reading, op: ListPartitions) -> list[Partition]:
    """Every partition, by name, with its resource and entity count."""
    return [partition_from_row(row) for row in tuples(at.conn).execute(_PARTITIONS)]


@READS.handles(Resolve)
def resolve(at: Reading, op: Resolve) -> tuple[Resolution | None, int]:
    """Where the entity lives (or the default partition), and the version read with it."""
    row = tuples(at.conn).execute(_RESOLVE, (op.entity, op.default_partition)).fetchone()
    return resolution_from_row(op.entity, row)


@READS.handles(ResolverVersion)
def resolver_version(at: Reading, op: ResolverVersion) -> int:
    """The mapping's version."""
    (version,) = tuples(at.conn).execute(_VERSION).fetchone()
    return int(version)
