"""Triage in bulk: count and list the tasks a filter matches, and act on many tasks in one write.

A bulk action acts on task ids fixed beforehand (at most `MAX_BULK`), in ONE
transaction, and gives one outcome per task: done, or refused with why (its
state changed since the ids were fixed, it is gone). Each task acted on
records the action in its history with `by` and the bulk action's id and size.
An idempotency key makes a scripted request act once: the key, a digest of
the request and the reply are stored in the same transaction as the action,
and the same key again returns the stored reply and changes nothing.

Every method checks its input first: a refused input raises a `ConfigError`
naming what was wrong, and nothing is read or written.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Unpack, final

from shepherd.core.bulk import MAX_BULK, BulkAction, BulkOutcome, TaskCount
from shepherd.errors import ConfigError
from shepherd.store.operator_rows import checked_actor
from shepherd.store.ops.base import Read, Runs, Write, operation
from shepherd.store.ops.tasks import ListTasks, TaskFilters, checked_listing

__all__ = [
    "MAX_KEY_CHARS",
    "AcknowledgeAlertsOf",
    "Bulk",
    "CountMatchingTasks",
    "FindBulkReply",
    "IdempotencyKey",
    "MatchingTaskIds",
    "RetryTasks",
    "StoredReply",
    "checked_task_ids",
]

#: The most characters an idempotency key (or a task id given to a bulk action) may have.
MAX_KEY_CHARS = 200


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class IdempotencyKey:
    """A scripted request's `Idempotency-Key`, and a digest of what it asked (to tell a reuse)."""

    key: str
    digest: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StoredReply:
    """What an idempotency key was first used for, and the outcome it replays."""

    action: BulkAction
    digest: str
    outcome: BulkOutcome


@operation
class CountMatchingTasks(Read[int]):
    """How many tasks match every filter of `listing` (its cursor aside), counted up to its `limit`.

    Reads at most `limit` entries of the index the listing itself uses, however
    many tasks match.
    """

    listing: ListTasks


@operation
class MatchingTaskIds(Read[list[str]]):
    """The ids of the tasks `listing` lists (at most its `limit`), newest first."""

    listing: ListTasks


@operation
class RetryTasks(Write[BulkOutcome]):
    """Retry each of `task_ids` in `error` from its failed step, with its own payloads, in ONE write.

    Each is retried as `RetryTask` retries one; its `retried` event's detail
    also holds `"bulk": bulk, "of": len(task_ids)`. A task not in `error` (or
    gone) is refused, with why, and the others go on. With `key`, the first
    request stores its outcome under the key; a request with the same key
    changes nothing and returns that outcome (`replayed`), or raises
    `ConfigError` if the key was first used for another request.
    """

    task_ids: Sequence[str]
    _: KW_ONLY
    by: str | None
    bulk: str
    key: IdempotencyKey | None = None


@operation
class AcknowledgeAlertsOf(Write[BulkOutcome]):
    """Acknowledge the open alerts of each of `task_ids` (now, by `by`), in ONE write.

    Each task whose open alerts it acknowledged gets an `alert_acknowledged`
    event (`"alerts": [ids], "by", "bulk", "of"`); one without an open alert
    is refused. `key` as for `RetryTasks`.
    """

    task_ids: Sequence[str]
    _: KW_ONLY
    by: str
    bulk: str
    key: IdempotencyKey | None = None


@operation
class FindBulkReply(Read[StoredReply | None]):
    """What the idempotency key `key` was first used for, and its outcome; None if it was not."""

    key: str


class Bulk(Runs):
    """The store's methods for acting on many tasks at once (inputs checked before anything runs)."""

    async def count_matching(
        self, *, cap: int = MAX_BULK, **filters: Unpack[TaskFilters]
    ) -> TaskCount:
        """How many tasks match every filter (`before` aside): exact up to `cap`, else `more`."""
        if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_BULK * 10:
            raise ConfigError("cap", f"must be a whole number from 1 to {MAX_BULK * 10}")
        listing = checked_listing(ListTasks(limit=cap + 1, **filters))
        found = await self.read(CountMatchingTasks(listing))
        return TaskCount(count=min(found, cap), more=found > cap)

    async def matching_task_ids(
        self, *, limit: int = MAX_BULK, **filters: Unpack[TaskFilters]
    ) -> list[str]:
        """`MatchingTaskIds`: the ids of at most `limit` tasks matching every filter, newest first."""
        return await self.read(MatchingTaskIds(checked_listing(ListTasks(limit=limit, **filters))))

    async def retry_tasks(
        self, task_ids: Sequence[str], *, by: str | None, key: IdempotencyKey | None = None
    ) -> BulkOutcome:
        """`RetryTasks`, under a new bulk id; `task_ids` checked first (`checked_task_ids`)."""
        ids = checked_task_ids(task_ids)
        return await self.write(
            RetryTasks(ids, by=checked_actor(by), bulk=_new_bulk(), key=_checked_key(key))
        )

    async def acknowledge_alerts_of(
        self, task_ids: Sequence[str], *, by: str, key: IdempotencyKey | None = None
    ) -> BulkOutcome:
        """`AcknowledgeAlertsOf`, under a new bulk id; `task_ids` checked first."""
        ids = checked_task_ids(task_ids)
        actor = checked_actor(by)
        if actor is None:
            raise ConfigError("by", "name who acknowledges the alerts")
        return await self.write(
            AcknowledgeAlertsOf(ids, by=actor, bulk=_new_bulk(), key=_checked_key(key))
        )

    async def bulk_reply(self, key: str) -> StoredReply | None:
        """`FindBulkReply` (the key checked first)."""
        return await self.read(FindBulkReply(_checked_text("key", key)))


def checked_task_ids(task_ids: object) -> tuple[str, ...]:
    """`task_ids` without repeats, in order, if a bulk action can take them.

    Raises:
        ConfigError: It is not a list of task ids (str, 1 to 200 characters,
            no control character), or holds more than MAX_BULK (field `task_ids`).
    """
    if isinstance(task_ids, str | bytes) or not isinstance(task_ids, Sequence):
        raise ConfigError(
            "task_ids", f"a list of task ids is needed, not {type(task_ids).__name__}"
        )
    ids = tuple(dict.fromkeys(_checked_text("task_ids", t) for t in task_ids))
    if len(ids) > MAX_BULK:
        raise ConfigError(
            "task_ids",
            f"{len(ids):,} tasks: a bulk action takes at most {MAX_BULK:,}; narrow the filter",
        )
    return ids


def _checked_key(key: object) -> IdempotencyKey | None:
    if key is None:
        return None
    if not isinstance(key, IdempotencyKey):
        raise ConfigError("key", f"an IdempotencyKey is needed, not {type(key).__name__}")
    _checked_text("Idempotency-Key", key.key)
    return key


def _checked_text(field: str, text: object) -> str:
    if not isinstance(text, str):
        raise ConfigError(field, f"a str is needed, not {type(text).__name__}")
    if not 0 < len(text) <= MAX_KEY_CHARS:
        raise ConfigError(field, f"{text[:40]!r} is not 1 to {MAX_KEY_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise ConfigError(field, f"{text[:40]!r} holds a control character or a lone surrogate")
    return text


def _new_bulk() -> str:
    """A new bulk action's id: 12 random hex digits (it names the action in each task's history)."""
    return secrets.token_hex(6)
