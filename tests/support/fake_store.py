"""A fake store is a dict of handlers, not a second backend.

A role receives a view of the store (`shepherd.store.roles`) whose methods all
build an operation and hand it to `write` or `read`; a fake view answers them
with the handler it files under the operation's type, and fails the test on
any operation it was not given a handler for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from shepherd.store.ops import Op, Read, Write

__all__ = ["ByOperation", "Handlers"]

T = TypeVar("T")

#: Operation type -> what answers it (a coroutine function of the operation).
Handlers = Mapping[type[Op[Any]], Callable[[Any], Awaitable[Any]]]


class ByOperation:
    """`write` and `read` answered by `handlers()`; put it first among a fake's bases."""

    def handlers(self) -> Handlers:
        raise NotImplementedError

    def write(self, op: Write[T], /) -> Awaitable[T]:
        return self._answer(op)

    def read(self, op: Read[T], /) -> Awaitable[T]:
        return self._answer(op)

    def _answer(self, op: Op[T]) -> Awaitable[T]:
        handler = self.handlers().get(type(op))
        if handler is None:
            raise AssertionError(f"this fake store was not given {type(op).__name__}: {op!r}")
        answer: Awaitable[T] = handler(op)
        return answer
