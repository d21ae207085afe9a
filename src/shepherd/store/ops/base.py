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
    takes any sequence; the store's method for the operation passes a tuple of
    what its caller gave, so that the operation stays an immutable value.
    """
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
    is `async def claim_tasks(self, *, locked_by, limit)`, which returns
    `await self.write(ClaimTasks(locked_by=locked_by, limit=limit))`
    (`self.read` for a `Read`): its parameters are the operation's fields, its
    result the operation's, and a `Sequence` field gets a tuple of what the
    caller passed. The class gets that function, written out for the
    operation's fields as a dataclass writes its `__init__`, so that a call
    costs what a hand-written method costs; its docstring is the operation's.
    """

    def __init__(self, op: Callable[P, Op[T]]) -> None:
        self.op = op

    def __set_name__(self, owner: type[Any], name: str) -> None:
        setattr(owner, name, _derive(owner, name, self.op))

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...
    @overload
    def __get__(
        self, obj: object, owner: type[Any] | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, obj: object, owner: type[Any] | None = None) -> Any:
        # Never reached: `__set_name__` puts a plain function in its place.
        raise AttributeError(f"{self.op!r}: a store method outside a class body")


def _derive(owner: type[Any], name: str, op: Any) -> Callable[..., Any]:
    """`async def name(self, <op's fields>)` that runs `op` built from them."""
    run = "write" if issubclass(op, Write) else "read"
    hints = inspect.get_annotations(op)
    namespace: dict[str, Any] = {"__name__": owner.__module__, "_op": op}
    fields = inspect.signature(op).parameters
    params, args = ["self", "/"], []
    for field in fields.values():
        if field.kind is field.KEYWORD_ONLY and "*" not in params:
            params.append("*")
        if field.default is field.empty:
            params.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
        sequence = str(hints.get(field.name, "")).startswith("Sequence[")
        args.append(
            f"{field.name}=tuple({field.name})" if sequence else f"{field.name}={field.name}"
        )
    source = (
        f"async def {name}({', '.join(params)}):\n"
        f"    return await self.{run}(_op({', '.join(args)}))\n"
    )
    exec(source, namespace)
    function: Callable[..., Any] = namespace[name]
    function.__qualname__ = f"{owner.__qualname__}.{name}"
    function.__doc__ = op.__doc__
    function.__annotations__ = {field: hint for field, hint in hints.items() if field in fields}
    function.op = op  # type: ignore[attr-defined]
    return function
