"""`Batch`: how an exclusive agent's owner gathers a key's calls into one handling."""

from __future__ import annotations

import math
from dataclasses import dataclass

from shepherd.errors import ConfigError

__all__ = ["Batch"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """How an exclusive agent's owner gathers a key's calls into one handling.

    The handler gets a list of requests and returns one result per request, in
    order; all their answers are committed in one transaction. A key's calls
    are flushed as soon as `max_items` wait, or once the oldest has waited
    `max_delay` seconds (so a lone call is served by the timer).

    Raises:
        ConfigError: `max_items` is not a whole number of at least 1, or
            `max_delay` is not a finite number of seconds of at least 0.
    """

    max_items: int = 100
    max_delay: float = 0.01

    def __post_init__(self) -> None:
        if isinstance(self.max_items, bool) or not isinstance(self.max_items, int):
            raise ConfigError("max_items", f"must be a whole number, not {self.max_items!r}")
        if self.max_items < 1:
            raise ConfigError("max_items", f"must be at least 1, not {self.max_items}")
        delay = self.max_delay
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise ConfigError("max_delay", f"must be a number of seconds, not {delay!r}")
        if not math.isfinite(delay) or delay < 0:
            raise ConfigError("max_delay", f"must be a finite number of seconds >= 0, not {delay}")
