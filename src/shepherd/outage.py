"""Store outages as one role loop sees them: logged when they start and when they end.

A role loop that meets `StoreUnavailableError` calls `await outage.pause(exc)`
and tries again; after a success it calls `outage.over()`. The first failure of
an outage is one WARNING naming the loop and the cause, later ones are DEBUG
only, and the first success after it is one INFO line saying how long it
lasted: an operator reads two lines per outage, not one per second. The pause
doubles from `initial` up to `max_delay`, drawn at random below that bound
(full jitter), so that many processes do not reconnect in step.

The outages of one process's loops report to its store's `StoreWatch`: the process is
in trouble from the first failure of any of its loops until one of them next
writes successfully. A read that succeeds while writes fail (a full disk) ends
nothing (`over(wrote=False)`), so the lines do not flap; a write that succeeds
ends the trouble, and the outage of every loop that only read since. The supervisor forgives the claims that
expired in such a span (`StoreWatch.covers`).

Anything else is not an outage: `pause` re-raises a damaged store
(`StoreDamagedError`) and any other exception, so that the loop ends and the
process stops with the reason (see `App.run`).
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, final

from shepherd.core.retry import capped_exponential
from shepherd.errors import StoreUnavailableError

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.watch import StoreWatch

__all__ = ["Outage", "is_outage"]


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` is a passing store condition that a role waits out."""
    return isinstance(exc, StoreUnavailableError)


@final
class Outage:
    """The state of one loop's access to the store: reachable, or out since when.

    Args:
        name: The loop's name in log lines ("scheduler claims", "agent requests").
        log: The logger the two lines of an outage go to.
        clock: Where `monotonic` comes from (how long the outage lasted), and what
            the pauses sleep on.
        rng: The source of jitter.
        initial: The first pause, in seconds.
        max_delay: The longest pause, in seconds.
        watch: The process's `StoreWatch`, which this outage reports to, or None.
    """

    def __init__(
        self,
        name: str,
        *,
        log: logging.Logger,
        clock: Clock,
        rng: random.Random | None = None,
        initial: float = 0.05,
        max_delay: float = 2.0,
        watch: StoreWatch | None = None,
    ) -> None:
        self.name = name
        self.log = log
        self.clock = clock
        self.rng = rng or random.Random()
        self.initial = initial
        self.max_delay = max_delay
        #: Failures in the current outage (0 while the store is reachable).
        self.failures = 0
        #: Outages seen so far (each counted once, when it starts).
        self.outages = 0
        self._since = 0.0
        self.watch = watch
        #: Only reads succeeded since this outage began.
        self._read = False
        if watch is not None:
            watch.watch(self)

    @property
    def active(self) -> bool:
        """Whether the last access to the store failed."""
        return self.failures > 0

    def failed(self, exc: BaseException) -> float:
        """Count one failure; return how long to pause before trying again.

        Raises:
            BaseException: `exc` itself, when it is not a passing store condition.
        """
        if not is_outage(exc):
            raise exc
        if self.failures == 0:
            self.outages += 1
            self._since = self.clock.monotonic()
            self.log.warning("%s: lost the store (%s); retrying with backoff", self.name, exc)
        else:
            self.log.debug("%s: store still unavailable: %s", self.name, exc)
        self.failures += 1
        if self.watch is not None:
            self.watch.failed()
        bound = capped_exponential(self.initial, 2.0, self.max_delay, self.failures - 1)
        return self.rng.uniform(bound / 2, bound)

    def over(self, *, wrote: bool = True) -> None:
        """The store answered: end the outage, if there was one, with one log line.

        Args:
            wrote: The loop wrote. A read alone ends no outage of a watched
                loop: writes may still fail (a full disk), and the next one
                would start the outage again; the outage ends when a loop of
                the process next writes.
        """
        if wrote or self.watch is None:
            self.end()
            if self.watch is not None:
                self.watch.wrote()
        elif self.failures:
            self._read = True

    def settle(self) -> None:
        """Another loop of the process wrote: end this outage if only reads succeeded since."""
        if self._read:
            self.end()

    def end(self) -> None:
        """End this loop's outage, if there was one, with one log line."""
        if self.failures:
            lasted = self.clock.monotonic() - self._since
            self.log.info(
                "%s: store reachable again after %.1f s (%d failed attempts)",
                self.name,
                lasted,
                self.failures,
            )
            self.failures = 0
            self._read = False

    async def pause(self, exc: BaseException) -> None:
        """`failed(exc)`, then sleep the backoff (on the clock)."""
        await self.clock.sleep(self.failed(exc))
