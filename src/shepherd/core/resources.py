"""Resource governance's records: resources, partitions, resolutions; and their rules.

A **resource** is something constrained that agents call (a database that
cannot scale out, a rate-limited API): a name, a kind, its connection details
as JSON (`info`), and optionally a `capacity` (most handlers using it at once,
cluster-wide) and a `rate` (calls per second). A **partition** is a logical
shard mapped to one resource; an **entity** (a user, an order) is mapped to
one partition by a lookup table, so one entity or a whole partition can move.
A **resolution** is the answer to "where does this entity live": entity,
partition, and the resource with its details. Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal

from shepherd.core.jsonvalue import JsonValue
from shepherd.core.limits import NAME_BYTES, too_long

__all__ = [
    "KEEP",
    "Keep",
    "Partition",
    "Resolution",
    "Resource",
    "ResourceChange",
    "Slot",
    "SlotLease",
    "check_capacity",
    "check_info",
    "check_kind",
    "check_name",
    "check_rate",
    "check_resource",
    "grant_slots",
    "resource_conflict",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """A constrained resource, as the store keeps it (every process agrees on it)."""

    name: str
    kind: str
    #: Connection details (a path, a URL, a region...): a JSON object. No secrets:
    #: it is shown by `shepherd resources list`; name a secret's place instead.
    info: dict[str, JsonValue]
    #: The most handlers that may use it at once across every process; None: no cap.
    capacity: int | None = None
    #: Calls per second, shared by every process; None: no limit.
    rate: float | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The resource as a JSON object (`--json` output, a step's recorded resolution)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "info": self.info,
            "capacity": self.capacity,
            "rate": self.rate,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Resource:
        """The resource `to_json` wrote."""
        return cls(
            name=value["name"],
            kind=value["kind"],
            info=dict(value.get("info") or {}),
            capacity=value.get("capacity"),
            rate=value.get("rate"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition:
    """A logical partition, the resource it lives on, and how many entities it holds."""

    name: str
    resource: str
    entities: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    """Where an entity lives: its partition, and the resource with its details."""

    entity: str
    partition: str
    resource: Resource
    #: While the partition is being moved (it drains), until when its move's lease
    #: runs; None otherwise. Not recorded with a step, not compared.
    draining_until: datetime | None = dataclasses.field(default=None, compare=False)

    def to_json(self) -> dict[str, JsonValue]:
        """The resolution as recorded with a step (replayed as is on a retry)."""
        return {
            "entity": self.entity,
            "partition": self.partition,
            "resource": self.resource.to_json(),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Resolution:
        """The resolution `to_json` wrote."""
        return cls(
            entity=value["entity"],
            partition=value["partition"],
            resource=Resource.from_json(value["resource"]),
        )


@dataclass(frozen=True, slots=True)
class Slot:
    """One held unit of a resource's capacity: a lease in the store, named by its holder.

    `holder` is unique to one handling of one request (the worker, the request's
    queue id and its attempt), so a release or a renewal never touches another's.
    """

    resource: str
    holder: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotLease:
    """A held slot as the store keeps it: who holds it, since when, until when."""

    resource: str
    holder: str
    worker: str
    acquired_at: datetime
    expires_at: datetime


def grant_slots(holders: Sequence[str], held: Collection[str], capacity: int) -> list[str]:
    """The holders granted a slot, in order: those holding one already, then others
    while fewer than `capacity` are held (`held`: the holders of unexpired slots)."""
    free = capacity - len(held)
    granted: list[str] = []
    for holder in holders:
        if holder in held:
            granted.append(holder)
        elif free > 0:
            granted.append(holder)
            free -= 1
    return granted


def check_name(what: str, name: object) -> str | None:
    """Why `name` cannot name a `what` (resource, partition, entity); None if it can."""
    if not isinstance(name, str):
        return f"{what} name must be a str, not {type(name).__name__}"
    if not name or name != name.strip():
        return f"{what} name {name!r} must be non-empty, without leading or trailing spaces"
    if (problem := too_long(f"{what} name", name, NAME_BYTES)) is not None:
        return problem
    if any(ord(c) < 32 for c in name):
        return f"{what} name {name!r} contains a control character"
    return None


def check_capacity(capacity: object) -> str | None:
    """Why `capacity` is not a capacity (a whole number of at least 1, or None); None if it is."""
    if capacity is None:
        return None
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        return f"capacity must be a whole number or none, not {capacity!r}"
    if capacity < 1:
        return f"capacity must be at least 1, not {capacity}"
    return None


def check_rate(rate: object) -> str | None:
    """Why `rate` is not a rate (calls per second above 0, finite, or None); None if it is."""
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        return f"rate must be a number of calls per second or none, not {rate!r}"
    if not rate > 0 or not math.isfinite(rate):
        return f"rate must be above 0 calls per second and finite, not {rate}"
    return None


def check_info(info: object) -> str | None:
    """Why `info` is not a resource's details (a JSON object); None if it is."""
    if not isinstance(info, dict):
        return f"info must be a JSON object, not {type(info).__name__}"
    if not all(isinstance(key, str) for key in info):
        return "info's keys must be strings"
    return None


def check_kind(kind: object) -> str | None:
    """Why `kind` is not a resource's kind (a short non-empty name); None if it is."""
    if not isinstance(kind, str):
        return f"kind must be a str, not {type(kind).__name__}"
    problem = check_name("kind", kind)
    return None if problem is None else problem.replace("kind name", "kind", 1)


def check_resource(resource: Resource) -> tuple[str, str] | None:
    """The first field of `resource` that breaks a rule and why, as (field, reason); None if none.

    `info` is checked for its shape only; the store's JSON encoding checks its values.
    """
    checks: tuple[tuple[str, str | None], ...] = (
        ("name", check_name("resource", resource.name)),
        ("kind", check_kind(resource.kind)),
        ("info", check_info(resource.info)),
        ("capacity", check_capacity(resource.capacity)),
        ("rate", check_rate(resource.rate)),
    )
    for field, problem in checks:
        if problem is not None:
            return field, problem
    return None


class Keep(enum.Enum):
    """The type of `KEEP`: a `ResourceChange` field that leaves the stored value as it is."""

    KEEP = "keep"


#: "Leave this field as it is" in a `ResourceChange` (None there means "no limit").
KEEP: Final[Literal[Keep.KEEP]] = Keep.KEEP


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceChange:
    """An operator's change to a resource: each field a new value, or `KEEP`.

    `capacity=None` and `rate=None` remove the limit; `KEEP` leaves it.
    """

    kind: str | Keep = KEEP
    info: dict[str, JsonValue] | Keep = KEEP
    capacity: int | Keep | None = KEEP
    rate: float | Keep | None = KEEP

    def is_empty(self) -> bool:
        """Whether the change changes no field."""
        return all(value is KEEP for value in (self.kind, self.info, self.capacity, self.rate))

    def applied_to(self, resource: Resource) -> Resource:
        """`resource` with this change's fields in place of its own (not checked here)."""
        kind = resource.kind if isinstance(self.kind, Keep) else self.kind
        info = resource.info if isinstance(self.info, Keep) else self.info
        capacity = resource.capacity if isinstance(self.capacity, Keep) else self.capacity
        rate = resource.rate if isinstance(self.rate, Keep) else self.rate
        return replace(resource, kind=kind, info=info, capacity=capacity, rate=rate)


def resource_conflict(bound: str | None, resolution: Resolution | None) -> str | None:
    """Why an agent bound to resource `bound` (`resource=`) cannot take a call whose
    entity resolved to `resolution`; None when they agree or either is missing."""
    if bound is None or resolution is None or resolution.resource.name == bound:
        return None
    return (
        f"it is bound to resource {bound!r} (resource=), but entity {resolution.entity!r} "
        f"lives on resource {resolution.resource.name!r} (partition {resolution.partition!r}); "
        "drop resource= to follow the entity, or call without entity="
    )
