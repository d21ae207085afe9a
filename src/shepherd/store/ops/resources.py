"""Resource governance's mapping: resources, partitions, entities' assignments, and resolving.

Every input is checked before anything is written (`shepherd.store.resource_rows`):
a bad name, kind, info, capacity or rate raises `InvalidResourceError` naming
it and changes nothing, as do the errors that say what does not exist. The
mapping is numbered: every write that changes a resource, a partition or an
assignment bumps the resolver's version once, in its transaction, and rings
`signals.RESOLVER` in every process (NOTIFY on PostgreSQL, the datagram path
on SQLite); a write that changes nothing bumps nothing.
"""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.core.moves import MOVE_LEASE, Moving
from shepherd.core.records import JsonValue
from shepherd.core.resources import (
    KEEP,
    Keep,
    Partition,
    Resolution,
    Resource,
    ResourceChange,
)
from shepherd.store.ops.base import Read, Runs, Write, method, operation
from shepherd.store.resource_rows import checked_change, checked_name, checked_resource

__all__ = [
    "AddResource",
    "AssignEntity",
    "DeclareResource",
    "DrainPartition",
    "EndPartitionDrain",
    "ListPartitions",
    "ListResources",
    "MovePartition",
    "RemoveResource",
    "Resolve",
    "ResolverVersion",
    "Resources",
    "SetResource",
    "UnassignEntity",
]


@operation
class DeclareResource(Write[bool]):
    """Insert `resource` if no resource has its name; never overwrite. Whether it did."""

    resource: Resource


@operation
class AddResource(Write[Resource]):
    """Insert `resource`. Raises ResourceExistsError if its name is taken."""

    resource: Resource


@operation
class SetResource(Write[Resource]):
    """Change the fields `change` gives (None clears `capacity` or `rate`); the resource as stored.

    Raises UnknownResourceError if there is no such resource.
    """

    name: str
    _: KW_ONLY
    change: ResourceChange


@operation
class RemoveResource(Write[Resource]):
    """Delete a resource no partition lives on; the resource it was.

    Raises UnknownResourceError, or ResourceInUseError naming the partitions.
    """

    name: str


@operation
class ListResources(Read[list[Resource]]):
    """Every resource, by name."""


@operation
class MovePartition(Write[tuple[Partition, str | None]]):
    """Put `partition` on `resource`, creating the partition if it is new.

    Returns the partition and the resource it was on before (None if new).
    Raises UnknownResourceError if there is no such resource.
    """

    partition: str
    resource: str


@operation
class DrainPartition(Write[Moving]):
    """One look of a move that drains `partition` off its resource onto `resource`.

    In one transaction: the steps in flight on the partition's resource are
    read; if there are none (or `force`), the partition goes onto `resource`
    (`moved`), else it is marked as being moved by `holder` until `lease`
    seconds from now (resolvers then hold the steps that would start for its
    entities). The mover calls it again until it moves; each look renews the
    lease. A partition that does not exist is created on `resource` when
    `create`, else UnknownPartitionError. Moving a partition onto its own
    resource changes nothing (it ends this holder's mark, if any).

    Raises UnknownResourceError, UnknownPartitionError, or PartitionMovingError
    while another holder's lease runs.
    """

    partition: str
    resource: str
    _: KW_ONLY
    holder: str
    lease: float = MOVE_LEASE
    create: bool = True
    force: bool = False


@operation
class EndPartitionDrain(Write[bool]):
    """End `holder`'s move of `partition` without moving it (the mover stopped); whether it held one."""

    partition: str
    holder: str


@operation
class AssignEntity(Write[str | None]):
    """Map `entity` to `partition`; the partition it was in before, or None.

    Raises UnknownPartitionError if there is no such partition.
    """

    entity: str
    partition: str


@operation
class UnassignEntity(Write[str | None]):
    """Forget `entity`'s partition; the partition it was in, or None if it had none."""

    entity: str


@operation
class ListPartitions(Read[list[Partition]]):
    """Every partition, by name, with its resource and how many entities it holds."""


@operation
class Resolve(Read[tuple[Resolution | None, int]]):
    """Where `entity` lives, and the version that answer was read at (one statement).

    An entity assigned to no partition resolves to `default_partition` when
    given; None when it has no partition (or the default does not exist).
    Raises InvalidResourceError for a name that cannot be an entity's.
    """

    entity: str
    _: KW_ONLY
    default_partition: str | None = None


@operation
class ResolverVersion(Read[int]):
    """The mapping's version now (0 before any change)."""


class Resources(Runs):
    """The store's methods for resources, partitions and assignments (inputs checked first)."""

    list_resources = method(ListResources)
    list_partitions = method(ListPartitions)
    resolver_version = method(ResolverVersion)

    async def declare_resource(self, resource: Resource) -> bool:
        """`DeclareResource`."""
        return await self.write(DeclareResource(checked_resource(resource)))

    async def add_resource(self, resource: Resource) -> Resource:
        """`AddResource`."""
        return await self.write(AddResource(checked_resource(resource)))

    async def set_resource(
        self,
        name: str,
        *,
        kind: str | Keep = KEEP,
        info: dict[str, JsonValue] | Keep = KEEP,
        capacity: int | Keep | None = KEEP,
        rate: float | Keep | None = KEEP,
    ) -> Resource:
        """`SetResource` with the fields given (`KEEP` leaves one as it is)."""
        change = ResourceChange(kind=kind, info=info, capacity=capacity, rate=rate)
        return await self.write(SetResource(name, change=checked_change(name, change)))

    async def remove_resource(self, name: str) -> Resource:
        """`RemoveResource`."""
        return await self.write(RemoveResource(checked_name("resource", name)))

    async def move_partition(self, partition: str, resource: str) -> tuple[Partition, str | None]:
        """`MovePartition`."""
        return await self.write(
            MovePartition(checked_name("partition", partition), checked_name("resource", resource))
        )

    async def drain_partition(
        self,
        partition: str,
        resource: str,
        *,
        holder: str,
        lease: float = MOVE_LEASE,
        create: bool = True,
        force: bool = False,
    ) -> Moving:
        """`DrainPartition`."""
        return await self.write(
            DrainPartition(
                checked_name("partition", partition),
                checked_name("resource", resource),
                holder=holder,
                lease=lease,
                create=create,
                force=force,
            )
        )

    async def end_partition_drain(self, partition: str, holder: str) -> bool:
        """`EndPartitionDrain`."""
        return await self.write(EndPartitionDrain(checked_name("partition", partition), holder))

    async def assign_entity(self, entity: str, partition: str) -> str | None:
        """`AssignEntity`."""
        return await self.write(
            AssignEntity(checked_name("entity", entity), checked_name("partition", partition))
        )

    async def unassign_entity(self, entity: str) -> str | None:
        """`UnassignEntity`."""
        return await self.write(UnassignEntity(checked_name("entity", entity)))

    async def resolve(
        self, entity: str, *, default_partition: str | None = None
    ) -> tuple[Resolution | None, int]:
        """`Resolve`."""
        default = (
            None if default_partition is None else checked_name("partition", default_partition)
        )
        return await self.read(Resolve(checked_name("entity", entity), default_partition=default))
