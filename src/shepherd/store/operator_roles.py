"""The store's slice for operators' named tokens and the overview's reads.

`shepherd.store.contract.Store` includes it; `shepherd.store.operator_facade`
implements it once for both backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.overview import Operator
    from shepherd.core.records import Lease
    from shepherd.core.states import ProcessState

__all__ = ["OverviewStore"]


class OverviewStore(Protocol):
    """Operators (named tokens, only a hash stored), the leadership lease, ended tasks by time."""

    async def add_operator(self, name: str) -> str:
        """Store operator `name` with a new secret token, and return the token.

        The store keeps only the token's SHA-256; the caller shows it once.

        Raises:
            ConfigError: `name` is not 1 to 64 ASCII letters, digits and `._@-`
                (starting with a letter or digit).
            OperatorExistsError: An operator has that name already.
        """

    async def list_operators(self) -> list[Operator]:
        """Every operator, by name (never their tokens)."""

    async def remove_operator(self, name: str) -> None:
        """Delete operator `name`; its token opens nothing from then on.

        Raises:
            UnknownOperatorError: No operator has that name.
        """

    async def authenticate(self, token: str) -> str | None:
        """The name of the operator whose token this is, or None.

        Sets the operator's `last_used_at` (at most once a minute).
        """

    async def get_lease(self, name: str) -> Lease | None:
        """The named lease as stored, expired or not; None if it was never taken."""

    async def ended_counts(
        self, *, since: datetime, bucket: float
    ) -> dict[tuple[int, ProcessState], int]:
        """How many tasks ended at or after `since`, by (slice index, state ended in).

        A task counts by its `updated_at` (when it ended) and its state:
        `processed`, `error`, `compensated` or `cancelled`; slice i holds
        [since + i*bucket, since + (i+1)*bucket), `bucket` in seconds.
        """
