"""Batches of an exclusive agent's calls: when a key's waiting calls are flushed, and
the error of a batch its handler broke. Pure: no I/O, no clock."""

from __future__ import annotations

__all__ = ["BATCH_ERROR", "batch_due"]


def batch_due(*, max_items: int, max_delay: float, waiting: int, oldest_age: float) -> float:
    """Seconds until a key's waiting calls should be flushed as a batch (0: now).

    Flushed at once when `max_items` wait; otherwise when the oldest has
    waited `max_delay` (so a lone call is served by the timer).
    """
    if waiting >= max_items:
        return 0.0
    return max(max_delay - oldest_age, 0.0)


#: The error type of the answers of a batch whose handler broke the batch contract.
BATCH_ERROR = "BatchError"
