"""Reminders of exclusive owners: set, forgotten, listed, and fired by the leading supervisor.

A reminder is kept by (agent, key, name); setting one of the same name
replaces it. Firing turns each due reminder into a call of its key (taken by
the key's owner alone, in order with the key's other calls,
`Owners.take_key_work`) in the transaction that moves the reminder to its next
tick: the tick's call id (`core.reminders.tick_call_id`) is unique among
calls, so a tick is one call however often, and by whom, it is fired.
"""

from __future__ import annotations

from dataclasses import KW_ONLY
from datetime import datetime

from shepherd.core.records import JsonValue
from shepherd.core.reminders import Reminder
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = [
    "FireReminders",
    "ForgetReminder",
    "ListReminders",
    "NextReminder",
    "Reminders",
    "SetReminder",
]


@operation
class SetReminder(Write[None]):
    """Store the reminder `name` of `agent`'s `key`, replacing one of that name.

    It is first due `delay` seconds after the store's now, or at `at`, and
    then every `every` seconds (None: once). A replaced reminder's next tick
    is the new one, and its generation is bumped: the ticks of the new one are
    new calls even at the instants of the old one's. Each tick's call gets
    `within` seconds per handling, `attempts` handlings (as `app.call`'s).

    Raises:
        PayloadError: `payload` is not JSON or is too large (nothing written).
    """

    agent: str
    key: str
    name: str
    payload: JsonValue
    _: KW_ONLY
    delay: float | None = None
    at: datetime | None = None
    every: float | None = None
    within: float
    attempts: int


@operation
class ForgetReminder(Write[bool]):
    """Delete the reminder `name` of `agent`'s `key`; whether there was one.

    A call it already queued stays queued (its owner still receives it).
    """

    agent: str
    key: str
    name: str


@operation
class FireReminders(Write[tuple[int, datetime | None]]):
    """Fire up to `limit` due reminders, each in the transaction that moves it on.

    Each due reminder queues one call to its key, for the latest tick of its
    grid at or before now (`core.reminders.fire`), and moves to its next tick
    (one that fires once is deleted). A periodic reminder whose previous call
    is still unanswered queues nothing for this tick (it moves on all the
    same): reminders never pile up behind an absent or slow owner. Returns
    how many calls were queued, and the next tick of any reminder (None: none).
    """

    _: KW_ONLY
    limit: int


@operation
class NextReminder(Read[datetime | None]):
    """The earliest next tick of any reminder, or None.

    One index-only read: an idle supervisor's scan writes nothing for reminders.
    """


@operation
class ListReminders(Read[list[Reminder]]):
    """The reminders, of `agent` (and its `key`) or all, by agent, key and name."""

    agent: str | None = None
    key: str | None = None


class Reminders(Runs):
    """The store's methods for reminders of exclusive owners."""

    set_reminder = method(SetReminder)
    forget_reminder = method(ForgetReminder)
    fire_reminders = method(FireReminders)
    list_reminders = method(ListReminders)
    next_reminder = method(NextReminder)
