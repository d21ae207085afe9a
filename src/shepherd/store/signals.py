"""In-process wake-ups: a role waits on a channel; a committed write rings it.

Take the event *before* looking for work and wait on it only if none was found:
a ring between the look and the wait is then never missed. Polling with a
timeout stays as the safety net for writes made by other processes. A store
that hears other processes' rings (`watch`) learns from the waits which
channels this process waits on, and listens to those alone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import final


@final
class Signals:
    """Named broadcast events, rung after commits (and by LISTEN/NOTIFY)."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._watch: Callable[[str], None] | None = None

    def watch(self, waited: Callable[[str], None]) -> None:
        """Call `waited(channel)` whenever a wait on `channel` begins (cheaply, and often)."""
        self._watch = waited

    def event(self, channel: str) -> asyncio.Event:
        """The event the next ring of `channel` will set."""
        ev = self._events.get(channel)
        if ev is None:
            ev = self._events[channel] = asyncio.Event()
            if self._watch is not None:
                self._watch(channel)
        return ev

    def ring(self, channel: str) -> None:
        """Wake everyone waiting on `channel`."""
        ev = self._events.pop(channel, None)
        if ev is not None:
            ev.set()

    def ring_all(self) -> None:
        """Wake every waiter (after a reconnect, or on shutdown)."""
        events, self._events = self._events, {}
        for ev in events.values():
            ev.set()

    @staticmethod
    async def wait(event: asyncio.Event, timeout: float) -> bool:  # noqa: ASYNC109 - a poll bound, not a cancel scope
        """Wait for `event` at most `timeout` seconds; True if it was rung.

        Not `asyncio.wait_for`: on Python 3.11 it can swallow a cancellation that
        arrives as the event is set, and a role would then never stop.
        `asyncio.timeout` tells its own cancellation from the caller's.
        """
        if event.is_set():
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await event.wait()
        return event.is_set()


TASKS = "tasks"
REPLIES = "replies"
EVENTS = "events"
REQUESTS = "requests"
#: Rung when a circuit breaker changes state.
BREAKERS = "breakers"
#: Rung when a resource, a partition or an entity's assignment changes (the
#: resolver's version moved): every process's resolver drops its cached answers.
RESOLVER = "resolver"
#: Rung when a capacity slot is given back: handlers waiting for one look again.
SLOTS = "slots"
#: Rung when a call (`app.call`) is sent or handed back: agent processes look for calls.
CALLS = "calls"
#: Rung when a call is answered: its caller reads the answer.
ANSWERS = "answers"


def task_channel(task_id: str) -> str:
    """The channel rung when task `task_id` changes state."""
    return f"task:{task_id}"
