"""Resources, partitions and assignments as rows, for both backends; and the checks before a write.

Every input is checked here, by the facade, before an operation is queued:
a refused one raises `InvalidResourceError` (naming the resource, partition
or entity and the field) and nothing is written. The backends' handlers then
only decide what exists (`UnknownResourceError`, `ResourceInUseError`...),
under the transaction's lock on the resolver's version row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shepherd.core.limits import NAME_BYTES, too_long
from shepherd.core.resources import (
    Keep,
    Partition,
    Resolution,
    Resource,
    ResourceChange,
    check_capacity,
    check_info,
    check_kind,
    check_name,
    check_rate,
    check_resource,
)
from shepherd.errors import InvalidResourceError, PayloadError, ResourceNameTooLongError
from shepherd.payloads import check_text, dumps, load_stored

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

__all__ = [
    "PARTITION_COLUMNS",
    "RESOLVER",
    "RESOURCE_COLUMNS",
    "checked_change",
    "checked_name",
    "checked_resource",
    "instant",
    "partition_from_row",
    "resolution_from_row",
    "resource_from_row",
]

#: The name of the resolver's row in `store_versions`.
RESOLVER = "resolver"
#: A resource's columns, in the order `resource_from_row` reads them (info as JSON text).
RESOURCE_COLUMNS = "name, kind, info, capacity, rate"
#: A partition's columns with its entity count, as `partition_from_row` reads them.
PARTITION_COLUMNS = "p.name, p.resource, count(e.entity)"


def instant(value: object) -> datetime | None:
    """A stored instant as an aware datetime: SQLite's unix seconds, PostgreSQL's timestamptz."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromtimestamp(float(value), UTC)  # type: ignore[arg-type]


def resource_from_row(row: Sequence[object]) -> Resource:
    """A resource from its row (`RESOURCE_COLUMNS`; info as JSON text, or already decoded)."""
    name, kind, info, capacity, rate = row
    decoded = load_stored(info) if isinstance(info, str) else info
    return Resource(
        name=str(name),
        kind=str(kind),
        info=dict(decoded) if isinstance(decoded, dict) else {},
        capacity=None if capacity is None else int(capacity),  # type: ignore[call-overload]
        rate=None if rate is None else float(rate),  # type: ignore[arg-type]
    )


def partition_from_row(row: Sequence[object]) -> Partition:
    """A partition from its row (`PARTITION_COLUMNS`)."""
    name, resource, entities = row
    return Partition(name=str(name), resource=str(resource), entities=int(entities))  # type: ignore[call-overload]


def resolution_from_row(entity: str, row: Sequence[object]) -> tuple[Resolution | None, int]:
    """A resolve's row, (version, partition, moving_to, move_until, *RESOURCE_COLUMNS),
    as (resolution or None, version); a partition being moved has `draining_until`."""
    version, partition, moving_to, move_until, *resource = row
    found = None
    if partition is not None and resource[0] is not None:
        found = Resolution(
            entity=entity,
            partition=str(partition),
            resource=resource_from_row(resource),
            draining_until=None if moving_to is None else instant(move_until),
        )
    return found, int(version)  # type: ignore[call-overload]


# -- checks before a write ---------------------------------------------------
def checked_name(what: str, name: object) -> str:
    """`name` as the name of a `what` (resource, partition, entity).

    Raises:
        InvalidResourceError: It cannot name one; the message shows it.
    """
    if isinstance(name, str) and (problem := too_long(f"{what} name", name, NAME_BYTES)):
        raise ResourceNameTooLongError("name", problem)
    problem = check_name(what, name)
    if problem is None:
        try:
            check_text(f"{what} name {name!r}", name)
        except PayloadError as exc:
            problem = exc.message
    if problem is not None:
        raise InvalidResourceError(None, "name", problem)
    return name  # type: ignore[return-value]


def checked_resource(resource: object) -> Resource:
    """`resource`, checked field by field, its info encodable as the store's JSON.

    Raises:
        InvalidResourceError: A field breaks a rule; the message names the
            resource and the field.
    """
    if not isinstance(resource, Resource):
        raise InvalidResourceError(
            None, "resource", f"expected a Resource, not {type(resource).__name__}"
        )
    checked_name("resource", resource.name)
    problem = check_resource(resource)
    if problem is not None:
        field, reason = problem
        raise InvalidResourceError(f"resource {resource.name!r}", field, reason)
    _encodable(resource.name, resource.info)
    return resource


def checked_change(name: str, change: ResourceChange) -> ResourceChange:
    """`change` to resource `name`, each field it sets checked.

    Raises:
        InvalidResourceError: The name or a new value breaks a rule; the message
            names the resource and the field.
    """
    checked_name("resource", name)
    subject = f"resource {name!r}"
    checks = (
        ("kind", change.kind, check_kind),
        ("info", change.info, check_info),
        ("capacity", change.capacity, check_capacity),
        ("rate", change.rate, check_rate),
    )
    for field, value, check in checks:
        if isinstance(value, Keep):
            continue
        problem = check(value)
        if problem is not None:
            raise InvalidResourceError(subject, field, problem)
    if not isinstance(change.info, Keep):
        _encodable(name, change.info)
    return change


def _encodable(name: str, info: dict[str, JsonValue]) -> None:
    try:
        dumps(info)
    except PayloadError as exc:
        problem = exc.message.replace("payload", "info", 1)
        raise InvalidResourceError(f"resource {name!r}", "info", problem) from None
