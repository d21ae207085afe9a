"""The facade's methods for operators (named tokens) and the overview, once for both backends.

`Facade` inherits these; each is one operation (`shepherd.store.ops`) run by
the backend's `read` or `write`, with its input checked first
(`operator_rows`): a refused input raises a `ShepherdError` and nothing is
read or written. A token never reaches an operation: `add_operator` makes one
and queues its hash; `authenticate` hashes what it is given and looks the hash
up. Neither logs anything.
"""

from __future__ import annotations

import hmac
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from shepherd.store import ops
from shepherd.store.operator_rows import (
    MAX_TOKEN_CHARS,
    checked_operator_name,
    new_token,
    token_hash,
)

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.core.records import Lease
    from shepherd.core.states import ProcessState

__all__ = ["TOUCH_EVERY", "OperatorMethods"]

R = TypeVar("R")

#: An operator's `last_used_at` is written at most this often (a session's
#: requests each authenticate; one write a minute is enough to tell who is active).
TOUCH_EVERY = timedelta(minutes=1)


class OperatorMethods(ABC):
    """Operators' tokens and the overview's reads, for `Facade`."""

    @abstractmethod
    def write(self, op: ops.Write[R]) -> Awaitable[R]: ...

    @abstractmethod
    async def read(self, op: ops.Read[R]) -> R: ...

    @abstractmethod
    def now(self) -> datetime: ...

    async def add_operator(self, name: str) -> str:
        """Store operator `name` with a new token; the token (only its hash is kept).

        Raises:
            ConfigError: The name is not a valid operator name.
            OperatorExistsError: An operator has that name already.
        """
        token = new_token()
        await self.write(
            ops.AddOperator(name=checked_operator_name(name), token_hash=token_hash(token))
        )
        return token

    async def list_operators(self) -> list[Operator]:
        """Every operator, by name."""
        return await self.read(ops.ListOperators())

    async def remove_operator(self, name: str) -> None:
        """Delete operator `name`: its token no longer opens anything.

        Raises:
            UnknownOperatorError: No operator has that name.
            ConfigError: It is not a valid operator name.
        """
        await self.write(ops.RemoveOperator(name=checked_operator_name(name)))

    async def authenticate(self, token: str) -> str | None:
        """The name of the operator whose token `token` is; None for any other text."""
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
            return None
        digest = token_hash(token)
        found = await self.read(ops.FindOperator(token_hash=digest))
        if found is None:
            return None
        operator, stored = found
        if not hmac.compare_digest(stored.encode(), digest.encode()):
            return None
        last = operator.last_used_at
        if last is None or self.now() - last >= TOUCH_EVERY:
            await self.write(ops.TouchOperator(name=operator.name))
        return operator.name

    async def get_lease(self, name: str) -> Lease | None:
        """The named lease as stored (expired or not), or None if it was never taken."""
        return await self.read(ops.GetLease(name=name))

    async def ended_counts(
        self, *, since: datetime, bucket: float
    ) -> dict[tuple[int, ProcessState], int]:
        """Tasks that ended at or after `since`, by (slice of `bucket` seconds, state)."""
        return await self.read(ops.EndedCounts(since=since, bucket=bucket))
