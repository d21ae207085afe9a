"""Batch handlers and reads for resources, partitions and entity assignments.

Every handler first locks the resolver's version row (`FOR UPDATE`): writes to
the mapping take turns across processes, so what a handler checks (does the
resource exist, does a partition use it) still holds when it writes. Each
operation that changes something bumps the version once and NOTIFYs RESOLVER
at commit; a refused one has written nothing.
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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.resource_rows import (
    PARTITION_COLUMNS,
    RESOLVER,
    partition_from_row,
    resolution_from_row,
    resource_from_row,
)

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

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

# info is read back as JSON text, as SQLite stores it.
_COLUMNS = "name, kind, info::text, capacity, rate"
_LOCK = f"SELECT version FROM store_versions WHERE name = '{RESOLVER}' FOR UPDATE"
_BUMP = f"UPDATE store_versions SET version = version + 1 WHERE name = '{RESOLVER}'"
_VERSION = f"SELECT version FROM store_versions WHERE name = '{RESOLVER}'"
_INSERT = (
    "INSERT INTO resources (name, kind, info, capacity, rate, created_at, updated_at) "
    "VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING name"
)
_GET = f"SELECT {_COLUMNS} FROM resources WHERE name = %s"
_UPDATE = (
    "UPDATE resources SET kind = %s, info = %s::jsonb, capacity = %s, rate = %s, "
    "updated_at = %s WHERE name = %s"
)
_USERS = "SELECT name FROM partitions WHERE resource = %s ORDER BY name"
_DELETE = "DELETE FROM resources WHERE name = %s"
_LIST = f"SELECT {_COLUMNS} FROM resources ORDER BY name"
_PARTITION_OF = "SELECT resource FROM partitions WHERE name = %s"
_PUT_PARTITION = (
    "INSERT INTO partitions (name, resource, updated_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (name) DO UPDATE SET resource = excluded.resource, "
    "updated_at = excluded.updated_at"
)
_PARTITION = (
    f"SELECT {PARTITION_COLUMNS} FROM partitions p "
    "LEFT JOIN entity_partitions e ON e.partition = p.name WHERE p.name = %s "
    "GROUP BY p.name, p.resource"
)
_PARTITIONS = (
    f"SELECT {PARTITION_COLUMNS} FROM partitions p "
    "LEFT JOIN entity_partitions e ON e.partition = p.name "
    "GROUP BY p.name, p.resource ORDER BY p.name"
)
_ENTITY = "SELECT partition FROM entity_partitions WHERE entity = %s"
_ASSIGN = (
    "INSERT INTO entity_partitions (entity, partition, updated_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (entity) DO UPDATE SET partition = excluded.partition, "
    "updated_at = excluded.updated_at"
)
_UNASSIGN = "DELETE FROM entity_partitions WHERE entity = %s"
# One statement (one snapshot), so the answer and the version are read together.
_RESOLVE = (
    "SELECT v.version, p.name, r.name, r.kind, r.info::text, r.capacity, r.rate "
    "FROM store_versions v "
    "LEFT JOIN partitions p ON p.name = coalesce("
    "(SELECT partition FROM entity_partitions WHERE entity = %s), %s::text) "
    "LEFT JOIN resources r ON r.name = p.resource "
    f"WHERE v.name = '{RESOLVER}'"
)


async def _lock(batch: Batch) -> None:
    """Take the mapping's lock for the rest of the transaction (again is free)."""
    await batch.scalar(_LOCK)


async def _changed(batch: Batch) -> None:
    await batch.send(_BUMP)
    batch.rings.add(ch.RESOLVER)


async def _get(batch: Batch, name: str) -> Resource | None:
    row = await (await batch.send(_GET, (name,))).fetchone()
    return None if row is None else resource_from_row(row)


async def _insert(batch: Batch, resource: Resource) -> bool | Exception:
    """Insert `resource` unless its name is taken: whether it did, or why its info was refused."""
    info = batch.encode(resource.info)
    if isinstance(info, Exception):
        return info
    r, now = resource, batch.now
    params = (r.name, r.kind, info, r.capacity, r.rate, now, now)
    if await batch.scalar(_INSERT, params) is None:
        return False
    await _changed(batch)
    return True


@WRITES.handles(DeclareResource)
async def declare(batch: Batch, ops: Sequence[DeclareResource]) -> list[object]:
    """Insert each resource whose name is free; never overwrite one (an operator's change stays)."""
    await _lock(batch)
    return [await _insert(batch, op.resource) for op in ops]


@WRITES.handles(AddResource)
async def add(batch: Batch, ops: Sequence[AddResource]) -> list[object]:
    """Insert each resource; ResourceExistsError if its name is taken."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        inserted = await _insert(batch, op.resource)
        if inserted is True:
            out.append(op.resource)
        else:
            out.append(inserted or ResourceExistsError(op.resource.name))
    return out


@WRITES.handles(SetResource)
async def set_resource(batch: Batch, ops: Sequence[SetResource]) -> list[object]:
    """Change the given fields of each resource; UnknownResourceError if it does not exist."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        old = await _get(batch, op.name)
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
            await batch.send(_UPDATE, params)
            await _changed(batch)
        out.append(new)
    return out


@WRITES.handles(RemoveResource)
async def remove(batch: Batch, ops: Sequence[RemoveResource]) -> list[object]:
    """Delete each resource that no partition lives on."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        old = await _get(batch, op.name)
        if old is None:
            out.append(UnknownResourceError(op.name))
            continue
        users = [str(name) for (name,) in await (await batch.send(_USERS, (op.name,))).fetchall()]
        if users:
            out.append(ResourceInUseError(op.name, users))
            continue
        await batch.send(_DELETE, (op.name,))
        await _changed(batch)
        out.append(old)
    return out


@WRITES.handles(MovePartition)
async def move(batch: Batch, ops: Sequence[MovePartition]) -> list[object]:
    """Put each partition on its resource (creating it); the resource it was on, or None."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        if await _get(batch, op.resource) is None:
            out.append(UnknownResourceError(op.resource, partition=op.partition))
            continue
        before = await batch.scalar(_PARTITION_OF, (op.partition,))
        if before != op.resource:
            await batch.send(_PUT_PARTITION, (op.partition, op.resource, batch.now))
            await _changed(batch)
        found = await (await batch.send(_PARTITION, (op.partition,))).fetchone()
        assert found is not None  # written above, or there before, under the lock
        out.append((partition_from_row(found), before))
    return out


@WRITES.handles(AssignEntity)
async def assign(batch: Batch, ops: Sequence[AssignEntity]) -> list[object]:
    """Map each entity to its partition; the partition it was in, or None."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        if await batch.scalar(_PARTITION_OF, (op.partition,)) is None:
            out.append(UnknownPartitionError(op.partition, entity=op.entity))
            continue
        before = await batch.scalar(_ENTITY, (op.entity,))
        if before != op.partition:
            await batch.send(_ASSIGN, (op.entity, op.partition, batch.now))
            await _changed(batch)
        out.append(before)
    return out


@WRITES.handles(UnassignEntity)
async def unassign(batch: Batch, ops: Sequence[UnassignEntity]) -> list[object]:
    """Forget each entity's partition; the partition it was in, or None."""
    await _lock(batch)
    out: list[object] = []
    for op in ops:
        before = await batch.scalar(_ENTITY, (op.entity,))
        if before is not None:
            await batch.send(_UNASSIGN, (op.entity,))
            await _changed(batch)
        out.append(before)
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(ListResources)
async def list_resources(reader: Reader, op: ListResources) -> list[Resource]:
    """Every resource, by name."""
    return [resource_from_row(row) for row in await reader.fetch(_LIST)]


@READS.handles(ListPartitions)
async def list_partitions(reader: Reader, op: ListPartitions) -> list[Partition]:
    """Every partition, by name, with its resource and entity count."""
    return [partition_from_row(row) for row in await reader.fetch(_PARTITIONS)]


@READS.handles(Resolve)
async def resolve(reader: Reader, op: Resolve) -> tuple[Resolution | None, int]:
    """Where the entity lives (or the default partition), and the version read with it."""
    rows = await reader.fetch(_RESOLVE, (op.entity, op.default_partition))
    return resolution_from_row(op.entity, rows[0])


@READS.handles(ResolverVersion)
async def resolver_version(reader: Reader, op: ResolverVersion) -> int:
    """The mapping's version."""
    rows = await reader.fetch(_VERSION)
    return int(rows[0][0])
