"""Triage in bulk, for both backends: count and list what a filter matches; retry and acknowledge many.

The reads find tasks as the task list does (`store.task_filters`), so a
count reads the index the page reads, at most its cap of entries. The writes
act on every task in one transaction: a retry holds the tasks (PostgreSQL
locks their rows `FOR UPDATE`), checks each one's state and applies
`core.operator`'s effect as `operator_actions.retry` does for one, its
statements batched; an acknowledgement is one UPDATE per chunk of ids. An idempotency key is inserted first, so that a
second request with it waits for the first to commit (PostgreSQL's row lock
on the new key; SQLite's write lock) and then reads its reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from shepherd.core import operator as rules
from shepherd.core.bulk import BulkAction, BulkMark, BulkOutcome, Refusal
from shepherd.core.events import EventKind
from shepherd.errors import ConfigError, ShepherdError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.ops.bulk import StoredReply
from shepherd.store.rows import TASK_COLUMNS, TaskCol
from shepherd.store.sql.operator_actions import APPLY, RESET_FAILED
from shepherd.store.sql.plan import Query, first, one, send
from shepherd.store.task_filters import count_query, few_ids, ids_probe, list_query

if TYPE_CHECKING:
    from shepherd.store.ops import (
        AcknowledgeAlertsOf,
        CountMatchingTasks,
        FindBulkReply,
        IdempotencyKey,
        MatchingTaskIds,
        RetryTasks,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = [
    "OPEN_ALERT",
    "acknowledge_alerts_of",
    "count_matching",
    "find_reply",
    "matching_ids",
    "retry_tasks",
]

#: When an alert is open (neither acknowledged nor resolved: `core.alerts.AlertState`).
OPEN_ALERT = "state = 'open'"
_ACKNOWLEDGE = (
    "UPDATE alerts SET state = 'acknowledged', acknowledged_at = ?, acknowledged_by = ? "
    f"WHERE task_id {{list}} AND {OPEN_ALERT} RETURNING id, task_id"
)
_TASKS = "SELECT id, key, reply_to FROM tasks WHERE id {list}"
# What `operator_actions.retry` reads and writes for one task, for many: the
# rows held (in id order: PostgreSQL's locks taken in one order), the tasks
# with an undo step recorded, the failed steps put back, the effect applied.
_HOLD = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id {{list}} ORDER BY id{{for_update}}"
_UNDOING = "SELECT DISTINCT task_id FROM steps WHERE kind = 'undo' AND task_id {list}"
_CLAIM_KEY = (
    "INSERT INTO bulk_requests (key, action, digest, reply, created_at) "
    "VALUES (?, ?, ?, NULL, ?) ON CONFLICT (key) DO NOTHING RETURNING key"
)
_REPLY = "SELECT action, digest, reply FROM bulk_requests WHERE key = ?"
_SET_REPLY = "UPDATE bulk_requests SET reply = ? WHERE key = ?"


# -- reads ---------------------------------------------------------------------
def count_matching(d: Dialect, op: CountMatchingTasks) -> Plan[int]:
    """How many tasks match `op.listing`'s filters, up to its limit."""
    listing = op.listing
    sql, params = count_query(
        listing,
        mark=d.mark,
        limit=d.limit(listing.limit),
        instant=d.stored,
        pin=d.name == "sqlite",  # a backend without statistics
    )
    row = yield from first(sql, params)
    return 0 if row is None else int(row[0])


def matching_ids(d: Dialect, op: MatchingTaskIds) -> Plan[list[str]]:
    """The ids of the tasks `op.listing` lists, newest first."""
    listing = op.listing
    ranged = yield from _ranged(d, listing.id_prefix)
    sql, params = list_query(
        listing,
        mark=d.mark,
        columns="created_at, id",
        limit=d.limit(listing.limit),
        instant=d.stored,
        prefix_range=ranged,
        pin=d.name == "sqlite",
    )
    return [str(row[1]) for row in (yield from one(sql, params))]


def _ranged(d: Dialect, prefix: str | None) -> Plan[bool]:
    """Whether an id prefix is read as a range of the primary key (`list_query`'s `prefix_range`)."""
    if not prefix:
        return True
    row = yield from first(*ids_probe(prefix, mark=d.mark))
    return row is not None and few_ids(int(row[0]))


def find_reply(d: Dialect, op: FindBulkReply) -> Plan[StoredReply | None]:
    """What the key was first used for, and the outcome it replays."""
    row = yield from first(d.sql(_REPLY), (op.key,))
    return None if row is None or row[2] is None else _stored(row)


def _stored(row: tuple[object, ...]) -> StoredReply:
    action, digest, reply = row
    outcome = BulkOutcome.from_json(json.loads(str(reply)))
    return StoredReply(action=BulkAction(str(action)), digest=str(digest), outcome=outcome)


# -- writes --------------------------------------------------------------------
def retry_tasks(batch: Writing, ops: Sequence[RetryTasks]) -> Plan[list[object]]:
    """Retry each operation's tasks in `error`, each from its failed step; one outcome each."""
    out: list[object] = []
    for op in ops:
        act = _retry(batch, op)
        out.append((yield from _once(batch, op.key, BulkAction.RETRY, act)))
    return out


def _retry(batch: Writing, op: RetryTasks) -> Callable[[], Plan[BulkOutcome]]:
    """Each task held first (all in a few statements), then retried as `RetryTask` retries one.

    The rule is `core.operator`'s (`may_retry`, `on_retry`), as for one task;
    only the statements are batched: the held rows and the tasks being
    undone are read per chunk of ids, and each task's writes are sent
    without waiting, so that 10,000 tasks take a few round trips, not 30,000.
    """

    def act() -> Plan[BulkOutcome]:
        d = batch.dialect
        queries = []
        for chunk in d.chunks(op.task_ids):
            queries.append(Query(*d.listed(_HOLD, chunk)))
            queries.append(Query(*d.listed(_UNDOING, chunk)))
        found = yield queries
        held = {row[TaskCol.ID]: row for rows in found[0::2] for row in rows}
        undoing = {row[0] for rows in found[1::2] for row in rows}
        mark = BulkMark(bulk=op.bulk, of=len(op.task_ids))
        done: list[str] = []
        refused: list[Refusal] = []
        writes: list[Query] = []
        for task_id in op.task_ids:
            row = held.get(task_id)
            if row is None:
                refused.append(Refusal(task_id=task_id, reason="no such task"))
                continue
            state = row[TaskCol.PROCESS_STATE]
            if not rules.may_retry(state):
                refused.append(Refusal(task_id=task_id, reason=f"it is {state}, not error"))
                continue
            effect = rules.on_retry(
                seq=None,
                cancel_requested=bool(row[TaskCol.CANCEL_REQUESTED]),
                undoing=task_id in undoing,
                by=op.by,
                bulk=mark,
            )
            writes.append(Query(d.sql(RESET_FAILED), (task_id,), rows=False))
            params = (
                str(effect.process_state),
                effect.cancel_requested,
                effect.failure_count,
                effect.clear_error,
                batch.now,
                batch.now,
                task_id,
            )
            writes.append(Query(d.sql(APPLY), params, rows=False))
            detail = dumps_detail(effect.detail)
            batch.event(task_id, row[TaskCol.KEY], row[TaskCol.REPLY_TO], effect.event, detail)
            done.append(task_id)
        if writes:
            yield writes
            batch.rings.add(ch.TASKS)
        return BulkOutcome(
            action=BulkAction.RETRY, bulk=op.bulk, done=tuple(done), refused=tuple(refused)
        )

    return act


def acknowledge_alerts_of(batch: Writing, ops: Sequence[AcknowledgeAlertsOf]) -> Plan[list[object]]:
    """Acknowledge the open alerts of each operation's tasks; one outcome each."""
    out: list[object] = []
    for op in ops:
        act = _acknowledge(batch, op)
        out.append((yield from _once(batch, op.key, BulkAction.ACKNOWLEDGE, act)))
    return out


def _acknowledge(batch: Writing, op: AcknowledgeAlertsOf) -> Callable[[], Plan[BulkOutcome]]:
    def act() -> Plan[BulkOutcome]:
        d = batch.dialect
        queries = []
        for chunk in d.chunks(op.task_ids):
            sql, params = d.listed(_ACKNOWLEDGE, chunk)
            queries.append(Query(sql, [batch.now, op.by, *params]))
            queries.append(Query(*d.listed(_TASKS, chunk)))
        found = yield queries
        alerts: dict[str, list[int]] = {}
        for alert_id, task_id in (row for rows in found[0::2] for row in rows):
            alerts.setdefault(task_id, []).append(int(alert_id))
        tasks = {row[0]: row for rows in found[1::2] for row in rows}
        mark = BulkMark(bulk=op.bulk, of=len(op.task_ids)).detail()
        done: list[str] = []
        refused: list[Refusal] = []
        for task_id in op.task_ids:
            acknowledged = sorted(alerts.get(task_id, ()))
            if not acknowledged:
                refused.append(Refusal(task_id=task_id, reason="no open alert"))
                continue
            done.append(task_id)
            if task_id in tasks:
                _, key, reply_to = tasks[task_id]
                detail = {"alerts": list(acknowledged), "by": op.by, **mark}
                kind = str(EventKind.ALERT_ACKNOWLEDGED)
                batch.event(task_id, key, reply_to, kind, dumps_detail(detail))
        return BulkOutcome(
            action=BulkAction.ACKNOWLEDGE,
            bulk=op.bulk,
            done=tuple(done),
            refused=tuple(refused),
            alerts=sum(len(ids) for ids in alerts.values()),
        )

    return act


def _once(
    batch: Writing,
    key: IdempotencyKey | None,
    action: BulkAction,
    act: Callable[[], Plan[BulkOutcome]],
) -> Plan[BulkOutcome | ShepherdError]:
    """`act`'s outcome, stored under `key`; or, for a key used before, its stored outcome."""
    if key is None:
        return (yield from act())
    d = batch.dialect
    params = (key.key, action.value, key.digest, batch.now)
    if (yield from first(d.sql(_CLAIM_KEY), params)) is None:
        row = yield from first(d.sql(_REPLY), (key.key,))
        if row is None or row[2] is None:  # cannot be: the key's row commits with its reply
            return ConfigError("Idempotency-Key", f"{key.key!r} has no stored reply")
        stored = _stored(row)
        if stored.action is not action or stored.digest != key.digest:
            return ConfigError(
                "Idempotency-Key", f"{key.key!r} was used for another request; use a new key"
            )
        outcome = stored.outcome
        return BulkOutcome(
            action=outcome.action,
            bulk=outcome.bulk,
            done=outcome.done,
            refused=outcome.refused,
            alerts=outcome.alerts,
            replayed=True,
        )
    outcome = yield from act()
    reply = json.dumps(outcome.to_json(), separators=(",", ":"))
    yield from send(d.sql(_SET_REPLY), (reply, key.key))
    return outcome
