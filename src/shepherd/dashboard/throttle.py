"""Failed token checks slowed per client address: a login form is not a token-guessing oracle.

Each failed check of a token (the login form's, or a script's
`Authorization: Bearer`) is counted against the client's address (the
connecting peer's, or the one a trusted proxy forwards: `reach`). Once an
address has failed `LIMIT` times within `WINDOW` seconds, its next attempts
are refused with 429 and `Retry-After` until the oldest of those failures is
older than the window; a success forgets its failures. At most `CLIENTS`
addresses are remembered: past that the oldest go first, so that a flood of
addresses costs bounded memory. Time comes from the clock given (monotonic
seconds), so tests move it instead of waiting.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import final

__all__ = ["CLIENTS", "LIMIT", "WINDOW", "LoginThrottle"]

#: Failures an address may have within WINDOW before it waits.
LIMIT = 5
#: Seconds a failure counts for.
WINDOW = 60.0
#: Addresses remembered at most.
CLIENTS = 10_000


@final
class LoginThrottle:
    """Counts failed token checks per client address; says how long one must wait."""

    def __init__(
        self,
        *,
        now: Callable[[], float] = time.monotonic,
        limit: int = LIMIT,
        window: float = WINDOW,
        clients: int = CLIENTS,
    ) -> None:
        self._now = now
        self._limit = limit
        self._window = window
        self._clients = clients
        self._failures: dict[str, deque[float]] = {}

    def wait(self, client: str) -> int:
        """Whole seconds `client` must wait before its next attempt (0: it may try now)."""
        failures = self._recent(client)
        if failures is None or len(failures) < self._limit:
            return 0
        return max(1, math.ceil(failures[0] + self._window - self._now()))

    def failed(self, client: str) -> None:
        """Count a failed check from `client`."""
        failures = self._recent(client)
        if failures is None:
            failures = self._failures[client] = deque(maxlen=self._limit)
            while len(self._failures) > self._clients:
                del self._failures[next(iter(self._failures))]
        failures.append(self._now())

    def succeeded(self, client: str) -> None:
        """Forget `client`'s failures: it holds a good token."""
        self._failures.pop(client, None)

    def _recent(self, client: str) -> deque[float] | None:
        """`client`'s failures within the window (dropping the older ones), or None."""
        failures = self._failures.get(client)
        if failures is None:
            return None
        horizon = self._now() - self._window
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[client]
            return None
        return failures
