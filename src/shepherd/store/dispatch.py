"""Tables from operation type to handler, filled by decorators in each backend's modules.

A backend's handler modules mark each handler with the operation it runs:

    @WRITES.handles(ops.ClaimTasks)
    def claim(batch: Batch, ops: Sequence[ops.ClaimTasks]) -> list[object]: ...

mypy checks that the handler takes that operation's type; registering two
handlers for one operation fails at import. Both backends split their handlers
into modules of the same names (`HANDLER_MODULES`); a backend's `handlers`
module imports them all (`import_handlers`), so its tables are complete once
it is imported (a test checks that every operation has exactly one handler in
each backend). A write handler gets every operation of its type in the batch
and returns one outcome per operation, in order (a value, or an exception for
that caller alone).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from shepherd.store.ops import Read, Write

__all__ = ["HANDLER_MODULES", "ReadTable", "WriteTable", "import_handlers"]

#: The modules of each backend's package that file its handlers.
HANDLER_MODULES = (
    "alerts",
    "breakers",
    "bulk",
    "calls",
    "children",
    "crashes",
    "depths",
    "keys",
    "leases",
    "operator_accounts",
    "operator_actions",
    "owned_steps",
    "owners",
    "queues",
    "rates",
    "reminders",
    "resources",
    "retention",
    "schedules",
    "signalling",
    "slots",
    "steps",
    "tasks",
    "workers",
)

B = TypeVar("B")
C = TypeVar("C")
Out = TypeVar("Out")
W = TypeVar("W", bound=Write[Any])
Q = TypeVar("Q", bound=Read[Any])


class WriteTable(Generic[B, Out]):
    """Write handlers: `handler(batch, operations of one type) -> one outcome per operation`."""

    def __init__(self) -> None:
        self._handlers: dict[type[Write[Any]], Callable[[B, Sequence[Any]], Out]] = {}

    def handles(
        self, op: type[W]
    ) -> Callable[[Callable[[B, Sequence[W]], Out]], Callable[[B, Sequence[W]], Out]]:
        def register(handler: Callable[[B, Sequence[W]], Out]) -> Callable[[B, Sequence[W]], Out]:
            _refuse_second(op, self._handlers)
            self._handlers[op] = handler
            return handler

        return register

    def __getitem__(self, op: type[Write[Any]]) -> Callable[[B, Sequence[Any]], Out]:
        return self._handlers[op]

    def __setitem__(self, op: type[Write[Any]], handler: Callable[[B, Sequence[Any]], Out]) -> None:
        self._handlers[op] = handler  # for tests that wrap a handler

    def __iter__(self) -> Iterator[type[Write[Any]]]:
        return iter(self._handlers)


class ReadTable(Generic[C, Out]):
    """Read handlers: `handler(reader, operation) -> its outcome`."""

    def __init__(self) -> None:
        self._handlers: dict[type[Read[Any]], Callable[[C, Any], Out]] = {}

    def handles(self, op: type[Q]) -> Callable[[Callable[[C, Q], Out]], Callable[[C, Q], Out]]:
        def register(handler: Callable[[C, Q], Out]) -> Callable[[C, Q], Out]:
            _refuse_second(op, self._handlers)
            self._handlers[op] = handler
            return handler

        return register

    def __getitem__(self, op: type[Read[Any]]) -> Callable[[C, Any], Out]:
        return self._handlers[op]

    def __iter__(self) -> Iterator[type[Read[Any]]]:
        return iter(self._handlers)


def import_handlers(package: str) -> None:
    """Import every handler module of a backend's `package`, filing all its handlers."""
    for name in HANDLER_MODULES:
        importlib.import_module(f"{package}.{name}")


def _refuse_second(op: type[Any], handlers: dict[Any, Any]) -> None:
    if op in handlers:
        raise RuntimeError(
            f"two handlers for {op.__name__}: {handlers[op].__qualname__} and another"
        )
