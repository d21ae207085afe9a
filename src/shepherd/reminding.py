"""Reminders of exclusive owners, as methods of the App: `remind`, `forget`, `reminders`.

A reminder is a named timer on one key of an exclusive agent: at each tick,
the key's owner receives a call whose request says which reminder it is
(`request.reminder`, `request.reminder_at`), in order with the key's other
calls, one at a time, whichever process owns the key then. The leading
supervisor turns due reminders into calls (`supervisor.reminders`): it is the
one process whose work survives any owner's death, and a call it queues
waits in the key's queue for whoever owns the key next, so a takeover needs
nothing of its own, and a tick is fenced once, where it is queued
(`core.reminders`). Everything is checked here before the store is touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd.core.limits import KEY_BYTES, too_long
from shepherd.core.reminders import checked_name, checked_timing
from shepherd.errors import ConfigError, UnknownAgentError

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.agents.agent import Agent
    from shepherd.config import Settings
    from shepherd.core.records import JsonValue
    from shepherd.core.reminders import Reminder
    from shepherd.store.contract import Store

__all__ = ["ReminderMethods"]

#: Handlings a reminder's call gets (as `app.call`'s default).
ATTEMPTS = 3


class ReminderMethods:
    """A mixin of the App: reminders for the owners of exclusive agents' keys."""

    agents: dict[str, Agent]
    settings: Settings

    if TYPE_CHECKING:

        @property
        def store(self) -> Store: ...

        async def open(self) -> Any: ...

    async def remind(
        self,
        agent: str,
        key: str,
        name: str,
        payload: JsonValue = None,
        *,
        delay: float | None = None,
        at: datetime | None = None,
        every: float | None = None,
    ) -> None:
        """Set the reminder `name` on `agent`'s `key`; one of the same name is replaced.

        The key's owner receives it as a call: its handler's `request.reminder` is
        `name`, `request.reminder_at` the tick, `request.payload` is `payload`. It
        is first due `delay` seconds from now (the store's clock) or `at` (an
        aware datetime); with neither, after one period, or at once if it fires
        once. With `every`, it then repeats every `every` seconds; ticks missed
        (no supervisor leading, or the key's previous reminder call not handled
        yet) are skipped, never queued twice. docs/howto/exclusive-owners.md.

        Nothing is stored when it raises.

        Raises:
            UnknownAgentError: No agent of that name is registered.
            ConfigError: The agent is not exclusive (`exclusive_by`), the key or
                name is empty or too long, or `delay`, `at` or `every` is refused
                (negative, NaN, infinite, a naive datetime, both `delay` and `at`);
                the message names it.
            PayloadError: `payload` is not JSON or is too large.
        """
        spec = self._exclusive(agent)
        try:
            checked_name(name)
            timing = checked_timing(delay=delay, at=at, every=every)
        except ValueError as exc:
            raise ConfigError("remind", f"reminder for agent {agent!r}: {exc}") from None
        self._check_key(agent, key)
        within = spec.within or self.settings.default_step_within
        await self.open()
        await self.store.set_reminder(
            agent,
            key,
            name,
            payload,
            delay=timing.delay,
            at=timing.at,
            every=timing.every,
            within=within,
            attempts=ATTEMPTS,
        )

    async def forget(self, agent: str, key: str, name: str) -> bool:
        """Cancel the reminder `name` on `agent`'s `key`; whether there was one.

        A tick's call already queued is still received. The agent need not be
        registered any more: a reminder of an agent the app dropped can be forgotten.

        Raises:
            ConfigError: The key or name is empty or too long.
        """
        self._check_key(agent, key)
        try:
            checked_name(name)
        except ValueError as exc:
            raise ConfigError("forget", f"reminder for agent {agent!r}: {exc}") from None
        await self.open()
        return await self.store.forget_reminder(agent, key, name)

    async def reminders(self, agent: str | None = None, key: str | None = None) -> list[Reminder]:
        """The stored reminders, of `agent` (and its `key`) or all, by agent, key and name."""
        await self.open()
        return await self.store.list_reminders(agent, key)

    def _exclusive(self, agent: str) -> Agent:
        spec = self.agents.get(agent)
        if spec is None:
            raise UnknownAgentError(agent)
        if spec.exclusive_by is None:
            raise ConfigError(
                "remind",
                f"agent {agent!r} is not exclusive: only a key of an agent declared with "
                "exclusive_by has an owner to remind",
            )
        return spec

    @staticmethod
    def _check_key(agent: str, key: object) -> None:
        if not isinstance(key, str) or not key:
            raise ConfigError(
                "remind", f"reminder for agent {agent!r}: the key must be a non-empty str"
            )
        problem = too_long("the reminder's key", key, KEY_BYTES)
        if problem is not None:
            raise ConfigError("remind", f"reminder for agent {agent!r}: {problem}")
