"""What a store operation is, and how the store's methods are derived from them.

An operation is a frozen dataclass whose type parameter is what it returns:
`ClaimTasks(locked_by=..., limit=...)` is a `Write[list[Task]]`. A `Write` is
group-committed (many callers' writes, one transaction); a `Read` runs on a
read connection. The store runs either through `Runs.write` / `Runs.read`.

Each concept's module declares its operations and a class of the store's
methods for them, one line each: `claim_tasks = method(ClaimTasks)` makes
`store.claim_tasks(locked_by=..., limit=...)` build the operation from its
arguments and run it, typed by the operation's own fields and result.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Self, TypeVar, dataclass_transform, overload

__all__ = ["Op", "Read", "Runs", "Write", "method", "operation"]

R = TypeVar("R", covariant=True)
T = TypeVar("T")
P = ParamSpec("P")
C = TypeVar("C")


class Op(Generic[R]):
    """A store operation whose outcome is an `R`."""

    __slots__ = ()


class Write(Op[R]):
    """An operation that changes the store: group-committed, fenced where it says so."""

    __slots__ = ()


class Read(Op[R]):
    """An operation that only reads (one statement or a few, no transaction of its own)."""

    __slots__ = ()


@dataclass_transform(frozen_default=True)
def operation(cls: type[C]) -> type[C]:
    """An operation's class: a frozen, slotted dataclass.

    Fields come in the order of the store method's parameters; those after a
    `_: KW_ONLY` marker are keyword-only. A field declared `Sequence[...]`
    holds a tuple of what it was given, so that an operation stays an
    immutable value however its caller built the sequence.
    """
    sequences = tuple(
        name
        for name, hint in inspect.get_annotations(cls).items()
        if isinstance(hint, str) and hint.startswith("Sequence[")
    )
    if sequences:

        def __post_init__(self: object) -> None:
            for name in sequences:
                object.__setattr__(self, name, tuple(getattr(self, name)))

        cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
    return dataclass(frozen=True, slots=True)(cls)


class Runs(ABC):
    """What runs operations: every class of store methods builds on these two."""

    @abstractmethod
    def write(self, op: Write[T], /) -> Awaitable[T]:
        """Run `op` in the next group-commit transaction; its outcome once durable."""

    @abstractmethod
    def read(self, op: Read[T], /) -> Awaitable[T]:
        """Run `op` on a read connection; its outcome."""


class method(Generic[P, T]):
    """The store method that builds operation `op` from its arguments and runs it.

    `claim_tasks = method(ClaimTasks)` in a class of store methods (a `Runs`)
    is an `async def claim_tasks(self, *, locked_by, limit)` that awaits
    `self.write(ClaimTasks(locked_by=..., limit=...))` (`self.read` for a
    `Read`): its parameters are the operation's fields, its result the
    operation's. The class gets a plain function, with the operation's
    docstring, so that a call costs what a hand-written method costs.
    """

    def __init__(self, op: Callable[P, Op[T]]) -> None:
        self.op = op

    def __set_name__(self, owner: type[Any], name: str) -> None:
        op: Any = self.op
        if issubclass(op, Write):

            async def run(self: Runs, /, *args: Any, **kwargs: Any) -> Any:
                return await self.write(op(*args, **kwargs))

        else:

            async def run(self: Runs, /, *args: Any, **kwargs: Any) -> Any:
                return await self.read(op(*args, **kwargs))

        run.__name__ = name
        run.__qualname__ = f"{owner.__qualname__}.{name}"
        run.__doc__ = op.__doc__
        run.__signature__ = _method_signature(op)  # type: ignore[attr-defined]
        run.op = op  # type: ignore[attr-defined]
        setattr(owner, name, run)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(
        self, obj: object, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        # Never reached: `__set_name__` puts a plain function in its place.
        raise AttributeError(f"{self.op!r}: a store method outside a class body")


def _method_signature(op: type[Any]) -> inspect.Signature:
    """The operation's constructor's signature, as a method's (self first)."""
    made = inspect.signature(op)
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    return made.replace(
        parameters=[self, *made.parameters.values()], return_annotation=inspect.Signature.empty
    )
