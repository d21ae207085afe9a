"""Resource governance's errors: resources, partitions, entities (re-exported by `shepherd.errors`).

Apart from the others so that each file stays small; import them from `shepherd.errors`.
"""

from __future__ import annotations

from shepherd.errors._base import ConfigError, ShepherdError, TooLongError


class ResourceError(ShepherdError):
    """A resource, a partition or an entity is not as the operation needs it."""


class InvalidResourceError(ResourceError, ConfigError):
    """A resource, partition or entity was given a value it cannot have; nothing was written.

    Also a ConfigError: `app.resource(...)` raises it when the app is declared.

    Attributes:
        subject: What was wrong, as the message names it (`resource 'orders-db'`), or
            None when the problem is the name itself (the message then shows it).
        field: The field that was wrong (`capacity`, `info`, `name`...).
    """

    def __init__(self, subject: str | None, field: str, problem: str) -> None:
        self.subject = subject
        self.field = field
        ShepherdError.__init__(self, problem if subject is None else f"{subject}: {problem}")


class ResourceNameTooLongError(InvalidResourceError, TooLongError):
    """A resource, partition or entity name over its limit (`shepherd.core.limits.NAME_BYTES`)."""

    def __init__(self, field: str, problem: str) -> None:
        InvalidResourceError.__init__(self, None, field, problem)


class UnknownResourceError(ResourceError):
    """No resource of that name."""

    def __init__(self, name: str, *, partition: str | None = None) -> None:
        self.name = name
        self.partition = partition
        where = "" if partition is None else f" (for partition {partition!r})"
        super().__init__(f"unknown resource {name!r}{where}: add it first (shepherd resources add)")


class ResourceExistsError(ResourceError):
    """A resource of that name exists already."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"resource {name!r} exists already (change it with shepherd resources set)"
        )


class ResourceInUseError(ResourceError):
    """Partitions still live on the resource: it cannot be removed."""

    def __init__(self, name: str, partitions: list[str]) -> None:
        self.name = name
        self.partitions = tuple(partitions)
        shown = ", ".join(repr(p) for p in self.partitions[:10])
        more = "" if len(self.partitions) <= 10 else f" and {len(self.partitions) - 10} more"
        super().__init__(
            f"resource {name!r} is in use by partition(s) {shown}{more}: "
            "move them to another resource first (shepherd partitions move)"
        )


class UnknownPartitionError(ResourceError):
    """No partition of that name."""

    def __init__(self, name: str, *, entity: str | None = None) -> None:
        self.name = name
        self.entity = entity
        where = "" if entity is None else f" (for entity {entity!r})"
        super().__init__(
            f"unknown partition {name!r}{where}: create it on a resource first "
            "(shepherd partitions move PARTITION RESOURCE)"
        )


class PartitionMovingError(ResourceError):
    """Another move of the partition is under way (it drains): a second one waits for it."""

    def __init__(self, name: str, to: str) -> None:
        self.name = name
        self.to = to
        super().__init__(
            f"partition {name!r} is being moved to resource {to!r} by another move: "
            "let it end (or its lease pass, if its mover stopped) and move it again"
        )


class UnresolvedEntityError(ResourceError):
    """The entity is assigned to no partition, and no default partition is configured."""

    def __init__(self, entity: str, reason: str | None = None) -> None:
        self.entity = entity
        super().__init__(
            f"entity {entity!r} cannot be resolved: "
            + (
                reason
                or "it is assigned to no partition (shepherd partitions assign ENTITY PARTITION) "
                "and no default_partition is configured"
            )
        )


class ResourceConflictError(ResourceError):
    """A call's entity lives on another resource than its agent's `resource=`: nothing sent."""

    def __init__(self, agent: str, problem: str) -> None:
        self.agent = agent
        super().__init__(f"agent {agent!r}: {problem}; nothing was sent")
