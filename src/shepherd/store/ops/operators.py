"""Operators: named tokens for the dashboard and the API, only a hash of each stored.

Each method checks its input first (`shepherd.store.operator_rows`): a refused
input raises a `ShepherdError` and nothing is read or written. A token never
reaches an operation: `add_operator` makes one and stores its hash;
`authenticate` hashes what it is given and looks the hash up. Neither logs
anything.
"""

from __future__ import annotations

import hmac
from abc import abstractmethod
from datetime import datetime, timedelta

from shepherd.core.overview import Operator
from shepherd.store.operator_rows import (
    MAX_TOKEN_CHARS,
    checked_operator_name,
    new_token,
    token_hash,
)
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "TOUCH_EVERY",
    "AddOperator",
    "FindOperator",
    "ListOperators",
    "Operators",
    "RemoveOperator",
    "TouchOperator",
]

#: An operator's `last_used_at` is written at most this often (a session's
#: requests each authenticate; one write a minute is enough to tell who is active).
TOUCH_EVERY = timedelta(minutes=1)


@operation
class AddOperator(Write[Operator]):
    """Store a new operator; `OperatorExistsError` (nothing written) if the name is taken."""

    name: str
    token_hash: str


@operation
class ListOperators(Read[list[Operator]]):
    """Every operator, by name (never their tokens)."""


@operation
class RemoveOperator(Write[None]):
    """Delete an operator (its token stops working); `UnknownOperatorError` for an unknown name."""

    name: str


@operation
class FindOperator(Read[tuple[Operator, str] | None]):
    """The operator whose token has this hash, with the hash as stored; None if none has."""

    token_hash: str


@operation
class TouchOperator(Write[None]):
    """Set an operator's `last_used_at` to now (nothing for an unknown name)."""

    name: str


class Operators(Runs):
    """The store's methods for operators' named tokens."""

    list_operators = method(ListOperators)

    @abstractmethod
    def now(self) -> datetime:
        """The store's clock."""

    async def add_operator(self, name: str) -> str:
        """Store operator `name` with a new secret token, and return the token.

        The store keeps only the token's SHA-256; the caller shows it once.

        Raises:
            ConfigError: `name` is not 1 to 64 ASCII letters, digits and `._@-`
                (starting with a letter or digit).
            OperatorExistsError: An operator has that name already.
        """
        token = new_token()
        await self.write(AddOperator(checked_operator_name(name), token_hash(token)))
        return token

    async def remove_operator(self, name: str) -> None:
        """Delete operator `name`; its token opens nothing from then on.

        Raises:
            UnknownOperatorError: No operator has that name.
            ConfigError: It is not a valid operator name.
        """
        await self.write(RemoveOperator(checked_operator_name(name)))

    async def authenticate(self, token: str) -> str | None:
        """The name of the operator whose token this is, or None for any other text.

        Sets the operator's `last_used_at` (at most once a minute, `TOUCH_EVERY`).
        """
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS:
            return None
        digest = token_hash(token)
        found = await self.read(FindOperator(digest))
        if found is None:
            return None
        operator, stored = found
        if not hmac.compare_digest(stored.encode(), digest.encode()):
            return None
        last = operator.last_used_at
        if last is None or self.now() - last >= TOUCH_EVERY:
            await self.write(TouchOperator(operator.name))
        return operator.name
