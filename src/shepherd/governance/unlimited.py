"""Resources an agent worker saw without a limit (no capacity, or no rate).

A gate asks the store once whether a resource is limited; an unlimited one is
then passed with no store round trip until the resolver's map changes (an
operator setting a capacity or a rate rings `resolver` in every process) or
`refresh` seconds pass, in case that wake-up was lost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from shepherd.store import signals as ch

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from shepherd.clock import Clock
    from shepherd.store.signals import Signals

__all__ = ["Unlimited"]


@final
class Unlimited:
    """The resources seen without a limit, and when (monotonic).

    Args:
        signals: Where the resolver's changes ring.
        clock: What the memory's age runs on.
        refresh: Seconds a resource seen unlimited is trusted to stay so.
        on_change: Called when the map changed (a gate drops what it took under it).
    """

    def __init__(
        self,
        signals: Signals,
        *,
        clock: Clock,
        refresh: float,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.signals = signals
        self.clock = clock
        self.refresh = refresh
        self.on_change = on_change
        self._seen: dict[str, float] = {}
        self._map_changed: asyncio.Event = signals.event(ch.RESOLVER)

    def remember(self, resource: str) -> None:
        """`resource` has no limit, as of now."""
        self._seen[resource] = self.clock.monotonic()

    def __contains__(self, resource: str) -> bool:
        """Whether `resource` is known to have no limit (and not for too long)."""
        if self._map_changed.is_set():
            self._seen.clear()
            self._map_changed = self.signals.event(ch.RESOLVER)
            if self.on_change is not None:
                self.on_change()
        seen = self._seen.get(resource)
        if seen is None:
            return False
        if self.clock.monotonic() - seen > self.refresh:
            del self._seen[resource]
            return False
        return True
