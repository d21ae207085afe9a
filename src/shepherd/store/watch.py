"""One process's view of its store: since when its role loops have been failing.

Every role loop of a process reports its store outages (`shepherd.outage.Outage`)
to the `StoreWatch` of the store they share. The process is in trouble from the
first failure of any loop until one of them next writes: a read that succeeds
while writes fail (a full disk) ends nothing, and a loop whose reads alone
succeeded is back when another loop writes. The supervisor forgives the claims
whose complete_by fell in such a span (`covers`): nobody could make progress then.
"""

from __future__ import annotations

import weakref
from collections import deque
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["StoreWatch"]


class Watched(Protocol):
    """A loop's outage, which another loop's write may end."""

    def settle(self) -> None: ...


@final
class StoreWatch:
    """Since when one process's loops have been failing to reach its store.

    Args:
        now: The store's clock (`Store.now`): spans are compared with
            `complete_by`, which is on that clock.
        lead: The longest a call may wait before it fails (`store_timeout`):
            the trouble began that long before the first failure, at the latest.
    """

    def __init__(self, now: Callable[[], datetime], *, lead: float = 0.0) -> None:
        self._now = now
        self._lead = timedelta(seconds=lead)
        self._outages: weakref.WeakSet[Watched] = weakref.WeakSet()
        #: When the current trouble began (the first failure of any loop), or None.
        self.since: datetime | None = None
        #: The last troubles that ended: (the first failure, the first write after it).
        self.spans: deque[tuple[datetime, datetime]] = deque(maxlen=16)

    @property
    def active(self) -> bool:
        """Whether a loop has failed since the last successful write."""
        return self.since is not None

    def watch(self, outage: Watched) -> None:
        self._outages.add(outage)

    def failed(self) -> None:
        """A loop failed: the trouble began when its call did, unless it already had."""
        if self.since is None:
            self.since = self._now() - self._lead

    def slow(self, seconds: float) -> None:
        """A call succeeded only after `seconds`: the store held the process back meanwhile.

        A write that waits for a lock another process holds (a process frozen
        inside a SQLite write) or for a stalled path may succeed before
        `store_timeout`; nobody could make progress meanwhile all the same.
        """
        if self.since is None:
            end = self._now()
            self._add(end - timedelta(seconds=seconds), end)

    def wrote(self) -> None:
        """A loop wrote: the trouble, if any, is over; loops that only read since, too."""
        if self.since is None:
            return
        self._add(self.since, self._now())
        self.since = None
        for outage in list(self._outages):
            outage.settle()

    def _add(self, start: datetime, end: datetime) -> None:
        """Keep the span `start`..`end`, joined to the last one if they overlap.

        A process whose loops keep failing now and then after an outage (a
        pool still reconnecting) makes many short spans, each dated back by
        the lead into the one before: joined, they cover what they covered
        apart, and never push the outage itself out of the spans kept.
        """
        if self.spans and start <= self.spans[-1][1]:
            first, last = self.spans.pop()
            start, end = min(first, start), max(last, end)
        self.spans.append((start, end))

    def covers(self, instant: datetime, *, margin: float) -> bool:
        """Whether `instant` fell in the current trouble or a recent one (to `margin` past its end).

        The margin gives the process's owners time to reconnect and make
        progress again after the store answers.
        """
        if self.since is not None and instant >= self.since:
            return True
        after = timedelta(seconds=margin)
        return any(start <= instant <= end + after for start, end in self.spans)

    def recently(self, now: datetime, *, margin: float) -> bool:
        """Whether the process is in trouble, or was until less than `margin` seconds ago."""
        if self.since is not None:
            return True
        return bool(self.spans) and now <= self.spans[-1][1] + timedelta(seconds=margin)
