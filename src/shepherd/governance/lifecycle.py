"""The life cycle of a key's ownership: the `on_acquire` and `on_release` hooks, and idling.

An exclusive agent may declare hooks that run at the edges of each ownership
of a key by this process (the seed's `OnActivateAsync`/`OnDeactivateAsync`):

- `on_acquire(key, state)` runs once per ownership, before its first handling
  (after a takeover too), with `state` the key's durable owner state as the
  store held it when this process took the key (what the last owner
  committed with its answers; None if no owner ever set one);
- `on_release(key, state)` runs once per ownership whose `on_acquire`
  returned, when the ownership ends without the process dying: the key is
  handed back (over this process's share, idle for `owner_idle` seconds, or
  its roles stopping) or moved (its lease lapsed, another owner took it), with
  `state` the owner state as this ownership last committed it.

A hook returns None (anything it returns is ignored); it may not change the
owner state, which only a handling's answers commit. An `async def` hook runs
on the event loop, a plain `def` in a thread (it may block: open a file,
fsync). An `on_acquire` that raises hands the key back: its calls wait for
the next owner, and this process leaves the key alone for a while
(`acquire_pause`), longer after each failure in a row, and alerts an
operator after `ALERT_AFTER` of them. An `on_release` that raises is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast, final

from shepherd.errors import ConfigError, StoreUnavailableError

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent, OwnerHook
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.records import JsonValue
    from shepherd.store.roles import OwnerStore

__all__ = [
    "ALERT_AFTER",
    "Failing",
    "OwnerLife",
    "Ownership",
    "acquire_pause",
    "check_life_cycle",
    "run_hook",
]

log = logging.getLogger("shepherd.agents.owners")

#: Told when a key's `on_acquire` has failed ALERT_AFTER times in a row in this
#: process: (agent, key, failures, the last error).
Failing = Callable[[str, str, int, str], None]

#: Failures of `on_acquire` in a row, for one key in one process, before an operator is alerted.
ALERT_AFTER = 3
#: The longest pause, in seconds, before this process takes a key whose `on_acquire` failed.
MAX_PAUSE = 60.0


def check_life_cycle(
    agent: str,
    *,
    exclusive: bool,
    on_acquire: object,
    on_release: object,
    owner_idle: object,
) -> float | None:
    """Check an agent's life-cycle options; `owner_idle` as a float (None: never idle).

    Raises:
        ConfigError: A hook is not callable, an option is given to an agent that
            is not exclusive, or `owner_idle` is not a positive number of
            seconds; the message names the agent.
    """
    given = {"on_acquire": on_acquire, "on_release": on_release, "owner_idle": owner_idle}
    for field, value in given.items():
        if value is not None and not exclusive:
            raise ConfigError(
                field, f"agent {agent!r}: only an exclusive agent (exclusive_by=...) has owners"
            )
    for field in ("on_acquire", "on_release"):
        hook = given[field]
        if hook is not None and not callable(hook):
            raise ConfigError(
                field, f"agent {agent!r}: must be a function (key, state), not {hook!r}"
            )
    if owner_idle is None:
        return None
    if (
        isinstance(owner_idle, bool)
        or not isinstance(owner_idle, int | float)
        or not math.isfinite(owner_idle)
        or owner_idle <= 0
    ):
        raise ConfigError(
            "owner_idle",
            f"agent {agent!r}: must be a positive, finite number of seconds, not {owner_idle!r}",
        )
    return float(owner_idle)


async def run_hook(hook: OwnerHook, key: str, state: JsonValue) -> None:
    """Run one hook with a copy of `state`: awaited if `async def`, else in a thread."""
    state = copy.deepcopy(state)
    if inspect.iscoroutinefunction(hook):
        await cast("Callable[[str, JsonValue], Awaitable[None]]", hook)(key, state)
        return
    done = await asyncio.to_thread(hook, key, state)
    if inspect.isawaitable(done):  # a plain function that returns a coroutine (a partial)
        await done


def acquire_pause(failures: int, poll_interval: float) -> float:
    """Seconds this process leaves a key alone after `failures` failed `on_acquire` in a row.

    Doubles from `poll_interval` with each failure, up to MAX_PAUSE: another
    process may take the key meanwhile.
    """
    return min(poll_interval * 2.0 ** max(failures - 1, 0), MAX_PAUSE)


@final
@dataclass(slots=True, kw_only=True)
class Ownership:
    """One ownership of a key by this process, as its loop keeps it."""

    agent: str
    key: str
    epoch: int
    #: The owner state as this ownership last committed it (at first: as taken).
    state: JsonValue
    #: The clock's monotonic second of the last handling (or of the take).
    active_at: float
    #: Whether `on_acquire` has returned (only then does `on_release` run).
    acquired: bool = False

    def idle_left(self, idle: float | None, now: float) -> float | None:
        """Seconds until the key has been idle `idle` seconds (None: it never idles)."""
        if idle is None:
            return None
        return self.active_at + idle - now


@final
class OwnerLife:
    """Runs the hooks of this process's ownerships, and remembers the keys whose acquire failed.

    Args:
        store: The store, to hand back a key whose `on_acquire` failed.
        owner: This process's owner name.
        clock: What the pauses after failures are measured on.
        settings: `poll_interval`, the first pause.
        failing: Told of a key whose `on_acquire` failed ALERT_AFTER times in a row.
    """

    def __init__(
        self,
        store: OwnerStore,
        *,
        owner: str,
        clock: Clock,
        settings: Settings,
        failing: Failing | None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.clock = clock
        self.settings = settings
        self.failing = failing
        #: Ownerships whose `on_acquire` returned (or that had none); those ended.
        self.acquired = 0
        self.released = 0
        #: `on_acquire` failures.
        self.failures = 0
        #: Per (agent, key): `on_acquire` failures in a row here, and the monotonic
        #: second before which this process leaves the key alone.
        self._failing: dict[tuple[str, str], tuple[int, float]] = {}

    def statistics(self) -> dict[str, int]:
        return {
            "owners_acquired": self.acquired,
            "owners_released": self.released,
            "owners_acquire_failures": self.failures,
        }

    def takeable(self, agent: str, keys: tuple[str, ...]) -> list[str]:
        """`keys` but those whose `on_acquire` failed here too lately to try again."""
        if not self._failing:
            return list(keys)
        now = self.clock.monotonic()
        return [k for k in keys if self._failing.get((agent, k), (0, now))[1] <= now]

    async def acquire(self, spec: Agent, own: Ownership) -> bool:
        """Run `on_acquire`; whether the ownership may serve (else the key was handed back)."""
        hook = spec.on_acquire
        if hook is not None:
            running = asyncio.ensure_future(run_hook(hook, own.key, own.state))
            try:
                await _finish(running)
            except asyncio.CancelledError:
                # Stopped meanwhile: an acquire that returned is still followed by a release.
                own.acquired = _succeeded(running)
                if own.acquired:
                    self.acquired += 1
                raise
            except Exception as exc:
                await self._failed(own, exc)
                return False
            self._failing.pop((own.agent, own.key), None)
        own.acquired = True
        own.active_at = self.clock.monotonic()
        self.acquired += 1
        return True

    async def _failed(self, own: Ownership, exc: Exception) -> None:
        """Hand the key back, leave it alone for a while, and alert after ALERT_AFTER in a row."""
        agent, key = own.agent, own.key
        self.failures += 1
        failures = self._failing.get((agent, key), (0, 0.0))[0] + 1
        pause = acquire_pause(failures, self.settings.poll_interval)
        self._failing[(agent, key)] = (failures, self.clock.monotonic() + pause)
        error = f"{type(exc).__name__}: {exc}"
        log.warning(
            "%s: on_acquire of key %r raised %s (%d in a row); the key is handed back, "
            "its calls wait for the next owner",
            agent,
            key,
            error,
            failures,
            exc_info=exc,
        )
        with contextlib.suppress(StoreUnavailableError):  # its lease expires anyway
            await self.store.release_keys(agent, [key], owner=self.owner)
        if failures == ALERT_AFTER and self.failing is not None:
            self.failing(agent, key, failures, error)

    async def release(self, spec: Agent, own: Ownership) -> None:
        """Run `on_release` once for an ownership that acquired (a failure is logged)."""
        own.acquired = False
        self.released += 1
        hook = spec.on_release
        if hook is None:
            return
        running = asyncio.ensure_future(run_hook(hook, own.key, own.state))
        try:
            await _finish(running)
        except Exception as exc:
            log.error(
                "%s: on_release of key %r raised %s: %s",
                own.agent,
                own.key,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )


async def _finish(running: asyncio.Future[None]) -> None:
    """Await `running` shielded: a waiter cancelled meanwhile lets it end first."""
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        await asyncio.wait({running})
        if not running.cancelled() and running.exception() is not None:
            log.error("an owner hook failed while its key stopped", exc_info=running.exception())
        raise


def _succeeded(running: asyncio.Future[None]) -> bool:
    return running.done() and not running.cancelled() and running.exception() is None
