"""How long an idle role loop waits before its next fallback poll.

Wake-ups (in-process signals, NOTIFY on PostgreSQL, datagrams on SQLite) bring
a loop to the store at once when work arrives; its poll is only the safety net
for a wake-up that was lost, and for work that comes due by the clock. A loop
that keeps finding nothing need not look as often: each empty look doubles the
wait, from `poll_interval` up to `idle_poll_max`, and the first look that finds
work starts again from `poll_interval`. An idle process then costs a few looks
a second instead of five per loop.
"""

from __future__ import annotations

from typing import final

__all__ = ["IdleBackoff"]


@final
class IdleBackoff:
    """The wait of a loop's fallback poll: doubles after each empty look, up to a cap.

    Args:
        first: The wait after a look that found work (and after the first empty
            one), in seconds.
        cap: The longest wait, in seconds; at least `first`.
    """

    def __init__(self, first: float, cap: float) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"need 0 < first <= cap, not first={first!r}, cap={cap!r}")
        self.first = first
        self.cap = cap
        self._wait = first

    def next(self, *, found: bool) -> float:
        """The wait before the next look, given whether this look found work.

        Args:
            found: Whether the look just made found anything to do.

        Returns:
            `first` if it did (and the doubling starts again); else the current
            wait, which then doubles for the next empty look, up to `cap`.
        """
        if found:
            self._wait = self.first
            return self.first
        wait = self._wait
        self._wait = min(wait * 2, self.cap)
        return wait
