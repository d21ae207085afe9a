"""A resource's rate in the agent worker: every try waits for a token of its bucket.

The bucket is in the store, shared by every process (`shepherd.core.rates`).
A healthy call should not cost a store round trip each time, so the gate takes
tokens a small batch at a time (a tenth of a second's worth, at least one, at
most 50) and spends them locally; tokens not spent within `HOLD` seconds are
dropped, never saved up. So in any span of `t` seconds, the cluster makes at
most `burst + rate * (t + HOLD)` calls, `burst` being one second's worth. One
take at a time per resource goes to the store from this process; the others
wait for its batch. A resource without a rate costs nothing after the first
look (`shepherd.governance.unlimited`); a changed rate drops the tokens taken at
the old one.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.errors import StoreUnavailableError
from shepherd.governance.unlimited import Unlimited
from shepherd.outage import Outage

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.roles import AgentStore

__all__ = ["HOLD", "RateGate"]

log = logging.getLogger("shepherd.rate")

#: Seconds a batch of tokens taken from the store may be spent in.
HOLD = 1.0
#: The shortest wait for the next token, whatever the store says.
_MIN_WAIT = 0.001


@dataclass(slots=True)
class _Stash:
    """Tokens this process took and has not spent, until `until` (monotonic)."""

    tokens: int
    until: float


def batch_of(rate: float | None) -> int:
    """How many tokens to take at once: a tenth of a second's worth, in 1..50."""
    if rate is None:
        return 1
    return max(1, min(50, math.floor(rate / 10)))


@final
class RateGate:
    """Hands out tokens of resources' shared buckets to one worker's tries.

    Args:
        store: The store that keeps the buckets.
        refresh: Seconds a resource seen without a rate is trusted to stay so.
        clock: What the waits and the stashes' ages run on.
    """

    def __init__(self, store: AgentStore, *, refresh: float, clock: Clock) -> None:
        self.store = store
        self.refresh = refresh
        self.clock = clock
        self._stash: dict[str, _Stash] = {}
        self._rates: dict[str, float] = {}
        self._takes: dict[str, asyncio.Lock] = {}
        #: Resources seen without a rate; a changed map drops the tokens taken under it.
        self._unlimited = Unlimited(
            store.signals, clock=clock, refresh=refresh, on_change=self._stash.clear
        )
        self.waits = 0
        self.outage = Outage("rate tokens", log=log, clock=clock, watch=store.watch)

    def statistics(self) -> dict[str, int]:
        return {"rate_waits": self.waits}

    async def before_call(self, resource: str) -> None:
        """Return once a try may use `resource`: it spent one of its tokens.

        Waits while the shared bucket is empty; the caller's deadline scope
        ends the wait.

        Raises:
            UnknownResourceError: There is no resource of that name.
        """
        while True:
            if resource in self._unlimited or self._spend(resource):
                return
            lock = self._takes.setdefault(resource, asyncio.Lock())
            async with lock:
                if self._spend(resource):  # another try's batch arrived meanwhile
                    return
                try:
                    granted, rate, wait = await self.store.take_tokens(
                        resource, want=batch_of(self._rates.get(resource))
                    )
                except StoreUnavailableError as exc:
                    await self.outage.pause(exc)
                    continue
                self.outage.over()
                if rate is None:
                    self._unlimited.remember(resource)
                    return
                self._rates[resource] = rate
                if granted:
                    until = self.clock.monotonic() + HOLD
                    self._stash[resource] = _Stash(tokens=granted - 1, until=until)
                    return
                self.waits += 1
                await self.clock.sleep(max(wait, _MIN_WAIT))

    def _spend(self, resource: str) -> bool:
        stash = self._stash.get(resource)
        if stash is None or stash.tokens <= 0:
            return False
        if self.clock.monotonic() >= stash.until:
            del self._stash[resource]  # too old to spend: the bucket's bound holds
            return False
        stash.tokens -= 1
        return True
