"""Resolvers: which partition an entity is in, and the resource that partition lives on.

`StoreResolver` reads the mapping the store keeps (entity -> partition ->
resource, changed live with `shepherd partitions ...`); `StaticResolver`
computes the partition and the resource's name with a function of yours, the
resource's details still read from the store. Both cache per process and
drop the whole cache when the store's resolver version moves
(`shepherd.core.resolution`). A process learns of a move from the RESOLVER
wake-up (rung by a write in this process, NOTIFY on PostgreSQL, a datagram on
SQLite) and, as a safety net, by reading the version on a timer of the App's
clock: every `resolver_refresh_ahead` seconds while the resolver is in use (it
resolved since its last read), every `resolver_refresh` seconds while not.
After a move it reads ahead what it had cached (refresh-ahead), so the next
calls find it: the seed's resolver, which "refreshes its data ahead of time
with a timer". The version covers every change of the mapping, so a timer
that finds it unchanged has nothing to read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, final

from shepherd.core.limits import NAME_BYTES, too_long
from shepherd.core.moves import draining
from shepherd.core.resolution import VersionedCache
from shepherd.core.resources import Resolution, Resource, check_name
from shepherd.errors import (
    ConfigError,
    InvalidResourceError,
    ResourceNameTooLongError,
    ShepherdError,
    UnresolvedEntityError,
)
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.store.roles import ResolverStore

__all__ = ["PREFETCH", "Resolver", "ResolverHost", "StaticResolver", "StoreResolver"]

log = logging.getLogger("shepherd.resolver")

#: The most cached entities a StoreResolver reads again, ahead, after a move.
PREFETCH = 64


class Resolver(Protocol):
    """Answers "where does this entity live" for a handler about to call a resource."""

    async def resolve(self, entity: str) -> Resolution:
        """The entity's partition and resource (raises UnresolvedEntityError if it has none)."""
        ...

    @property
    def version(self) -> int:
        """The version of the entity -> partition -> resource mapping this resolver reflects."""
        ...


class ResolverHost(Protocol):
    """What a resolver uses of its App (the App satisfies it; no role imports the App)."""

    @property
    def store(self) -> ResolverStore:
        """The App's store."""
        ...

    @property
    def settings(self) -> Settings:
        """The App's settings (`resolver_refresh`, `default_partition`)."""
        ...

    @property
    def clock(self) -> Clock:
        """The App's clock, on which the version is read again periodically."""
        ...

    @property
    def on_close(self) -> list[Callable[[], Awaitable[object]]]:
        """Run by the App's next `close`: the resolver stops its watch there."""
        ...

    async def open(self) -> object:
        """Open the App's store (idempotent)."""
        ...


V = TypeVar("V")


class _Watched(Generic[V]):
    """A per-process cache invalidated by the store's resolver version, and its watch.

    The watch starts with the first `resolve` and stops when the App closes:
    it reads the version, then waits for the RESOLVER wake-up or its timer
    (`_rest`), and again. While a wake-up has arrived that the watch has not
    yet read the version for, the cache is not trusted.
    """

    def __init__(self) -> None:
        self._answers: VersionedCache[str, V] = VersionedCache()
        self._host: ResolverHost | None = None
        self._watch: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._hits = 0
        self._misses = 0
        self._refreshes = 0
        self._invalidations = 0
        #: Version reads made early by the timer because the resolver was in use.
        self._ahead_reads = 0
        #: Whether the resolver resolved since the watch last read the version.
        self._used = False

    def bind(self, host: ResolverHost) -> None:
        """Use `host`'s store, settings and clock (the App does this when it is given one).

        Raises:
            ConfigError: The resolver is bound to another App already.
        """
        if self._host is not None and self._host is not host:
            raise ConfigError("resolver", "this resolver belongs to another App already")
        self._host = host

    @property
    def version(self) -> int:
        """The newest version of the mapping this process has seen (0 before the first read)."""
        return self._answers.version

    def statistics(self) -> dict[str, int]:
        """This process's counters: the version seen, answers cached, hits, misses,
        version reads (`refreshes`; `ahead`: those the timer made early because the
        resolver was in use) and caches dropped for a newer version (`invalidations`).
        """
        return {
            "version": self.version,
            "cached": len(self._answers),
            "hits": self._hits,
            "misses": self._misses,
            "refreshes": self._refreshes,
            "ahead": self._ahead_reads,
            "invalidations": self._invalidations,
        }

    async def stop(self) -> None:
        """Stop watching (the App's `close` calls it); the next `resolve` starts again."""
        watch, self._watch = self._watch, None
        self._wake = None
        if watch is not None and not watch.done():
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    # -- for subclasses --------------------------------------------------------
    def _bound(self) -> ResolverHost:
        if self._host is None:
            raise ConfigError(
                "resolver", "the resolver is not attached to an App: pass it as App(resolver=...)"
            )
        return self._host

    def _trusted(self) -> bool:
        """Whether the cache reflects the newest version this process was told of."""
        wake = self._wake
        return wake is not None and not wake.is_set()

    def _seen(self, version: int) -> None:
        keys = self._answers.keys()
        if self._answers.observe(version):
            self._invalidations += 1
            self._moved(keys)

    def _moved(self, keys: list[str]) -> None:
        """The version moved and the cache was dropped; `keys` were cached before."""

    async def _refill(self) -> None:
        """Read ahead what was cached before the last move."""

    def _start(self) -> None:
        self._used = True
        watch = self._watch
        if watch is not None and not watch.done():
            return
        host = self._bound()
        self._watch = asyncio.get_running_loop().create_task(
            self._watching(host), name="shepherd resolver watch"
        )
        host.on_close.append(self.stop)

    async def _watching(self, host: ResolverHost) -> None:
        store, clock = host.store, host.clock
        failing = False
        while True:
            wake = store.signals.event(ch.RESOLVER)
            self._used = False  # what resolves from now on asks the timer for an early read
            try:
                await host.open()
                version = await store.resolver_version()
            except ShepherdError as exc:
                if not failing:
                    log.warning("cannot read the resolver's version (cached answers stay): %s", exc)
                failing = True
            else:
                failing = False
                self._refreshes += 1
                self._seen(version)
                # Trusted again only now: until the version was read, a wake-up
                # meant the cache might be stale.
                self._wake = wake
                try:
                    await self._refill()
                except ShepherdError as exc:
                    log.warning("cannot read ahead the resolutions cached before a move: %s", exc)
            await self._rest(clock, wake, host.settings)

    async def _rest(self, clock: Clock, wake: asyncio.Event, settings: Settings) -> None:
        """Wait for the next version read: a wake-up, or the timer.

        The timer goes off every `resolver_refresh_ahead` seconds: if the
        resolver resolved meanwhile, the version is read now, ahead of the
        next calls; if not, the wait goes on, up to `resolver_refresh` in all.
        """
        left = settings.resolver_refresh
        ahead = min(settings.resolver_refresh_ahead, left)
        while left > 0:
            step = min(ahead, left)
            if await clock.wait_event(wake, step):
                return
            left -= step
            if self._used and left > 0:
                self._ahead_reads += 1
                return


@final
class StoreResolver(_Watched[Resolution]):
    """Resolves entities by the mapping in the store: entity -> partition -> resource.

    Args:
        default_partition: The partition an unassigned entity resolves to; the
            App's `default_partition` setting when None.
    """

    def __init__(self, *, default_partition: str | None = None) -> None:
        super().__init__()
        if default_partition is not None:
            problem = check_name("partition", default_partition)
            if problem is not None:
                raise ConfigError("default_partition", problem)
        self._default = default_partition
        self._ahead: list[str] = []
        self._drain_waits = 0

    @property
    def default_partition(self) -> str | None:
        """The partition an entity assigned to none resolves to, or None."""
        if self._default is not None:
            return self._default
        host = self._host
        return None if host is None else host.settings.default_partition

    async def resolve(self, entity: str) -> Resolution:
        """The entity's partition and resource, from the cache while its version holds.

        Raises:
            UnresolvedEntityError: The entity is assigned to no partition, and
                there is no default partition (or it does not exist).
            InvalidResourceError: `entity` cannot be an entity's name.
            StoreUnavailableError: The store cannot be reached (nothing cached).
        """
        self._start()
        if type(entity) is str and self._trusted():
            found = self._answers.get(entity)
            if found is not None:
                self._hits += 1
                return found
        self._misses += 1
        return await self._read(entity)

    async def _read(self, entity: str, *, wait: bool = True) -> Resolution:
        """The entity's resolution from the store, cached unless its partition drains.

        While its partition is being moved (`shepherd partitions move`), a
        resolution made to start a step waits (`wait`): until the move's
        version wakes this process (the move ended), or its lease passes,
        then it is read again. Nothing is sent, failed or charged meanwhile.
        """
        host = self._bound()
        await host.open()
        default = self.default_partition
        while True:
            # Registered before the read, so that a move ending meanwhile is not missed.
            wake = host.store.signals.event(ch.RESOLVER)
            found, version = await host.store.resolve(entity, default_partition=default)
            self._seen(version)
            if found is None:
                if default is None:
                    raise UnresolvedEntityError(entity)
                raise UnresolvedEntityError(
                    entity,
                    f"it is assigned to no partition, and the default partition {default!r} "
                    f"does not exist (shepherd partitions move {default} RESOURCE)",
                )
            until, now = found.draining_until, host.clock.now()
            if not draining(until, now):
                self._answers.put(entity, found, version)
                return found
            if not wait:
                return found
            assert until is not None
            self._drain_waits += 1
            lapse = (until - now).total_seconds()
            await host.clock.wait_event(wake, min(lapse, host.settings.resolver_refresh))

    def statistics(self) -> dict[str, int]:
        """The counters of `_Watched.statistics`, and `drain_waits`: how many times a
        resolution waited for its partition's move to end."""
        return {**super().statistics(), "drain_waits": self._drain_waits}

    def _moved(self, keys: list[str]) -> None:
        self._ahead = keys[-PREFETCH:]

    async def _refill(self) -> None:
        ahead, self._ahead = self._ahead, []
        for entity in ahead:
            with contextlib.suppress(UnresolvedEntityError):
                await self._read(entity, wait=False)


#: `fn(entity) -> (partition, resource name)` of a StaticResolver.
StaticMapping = Callable[[str], tuple[str, str]]


@final
class StaticResolver(_Watched[Resource]):
    """Resolves entities with a function: `fn(entity) -> (partition, resource name)`.

    The seed's static resolution (`user_id % 4` picks the database): simple,
    but an entity cannot move without changing the function. The resource's
    details (kind, info, capacity, rate) are the store's, cached by version
    like `StoreResolver`'s answers.

    Args:
        fn: A pure function of the entity's name.
    """

    def __init__(self, fn: StaticMapping) -> None:
        super().__init__()
        if not callable(fn):
            raise ConfigError("resolver", f"StaticResolver needs a function, not {fn!r}")
        self._fn = fn
        self._loaded = False

    async def resolve(self, entity: str) -> Resolution:
        """The function's partition for `entity`, on the stored resource it names.

        Raises:
            UnresolvedEntityError: The function's answer is not two names, or
                names a resource that does not exist.
            InvalidResourceError: `entity` cannot be an entity's name.
        """
        if isinstance(entity, str) and (problem := too_long("entity name", entity, NAME_BYTES)):
            raise ResourceNameTooLongError("name", problem)
        problem = check_name("entity", entity)
        if problem is not None:
            raise InvalidResourceError(None, "name", problem)
        partition, name = self._mapped(entity)
        self._start()
        resource = self._answers.get(name) if self._trusted() else None
        if resource is None:
            self._misses += 1
            await self._load()
            resource = self._answers.get(name)
            if resource is None:
                raise UnresolvedEntityError(
                    entity,
                    f"the static resolver puts it in partition {partition!r} on resource "
                    f"{name!r}, which does not exist (shepherd resources add {name} --kind KIND)",
                )
        else:
            self._hits += 1
        return Resolution(entity=entity, partition=partition, resource=resource)

    def _mapped(self, entity: str) -> tuple[str, str]:
        answer = self._fn(entity)
        if (
            isinstance(answer, tuple)
            and len(answer) == 2
            and all(check_name("name", part) is None for part in answer)
        ):
            return answer
        raise UnresolvedEntityError(
            entity, f"the static resolver returned {answer!r}, not (partition, resource) names"
        )

    async def _load(self) -> None:
        host = self._bound()
        await host.open()
        store = host.store
        # The version first: the resources read after it are at least that new.
        version = await store.resolver_version()
        listed = await store.list_resources()
        self._seen(version)
        if version == self._answers.version:
            self._answers.clear()
            for resource in listed:
                self._answers.put(resource.name, resource, version)
            self._loaded = True

    def _moved(self, keys: list[str]) -> None:
        self._loaded = False

    async def _refill(self) -> None:
        if not self._loaded and self._invalidations:
            await self._load()
