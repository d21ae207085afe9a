"""The insert of new tasks, shared by `submit` and `submit_many` (`tasks`).

Every statement whose rows a submit needs (the insert, the tombstones of
purged keys, the tasks a key already names) is sent in the handler's first
phase and read in its second (`phases`): one round trip however many tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.errors import StoreUnavailableError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.contract import NewTask, Submitted
from shepherd.store.ids import new_task_id
from shepherd.store.postgres import retention
from shepherd.store.postgres.batch import INSTANT

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.phases import Second

__all__ = ["insert"]

# A task is due at its given `not_before`, else at the batch's instant plus its
# delay; its deadline (if any) counts from then (`core.timing`).
_DUE = f"coalesce(v.not_before, {INSTANT} + v.delay * interval '1 second')"
_INSERT_NEW = (
    "INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, complete_within, "
    "failure_count, not_before, reply_to, created_at, updated_at, trace, deadline) "
    f"SELECT v.id, v.workflow, v.key, v.input, 'pending', 0, v.complete_within, 0, {_DUE}, "
    f"v.reply_to, {INSTANT}, {INSTANT}, v.trace, {_DUE} + v.deadline * interval '1 second' "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::float8[], %b::text[], "
    "%b::text[], %b::timestamptz[], %b::float8[], %b::float8[]) WITH ORDINALITY "
    "AS v(id, workflow, key, input, complete_within, reply_to, trace, not_before, delay, "
    "deadline, n) "
)
_INSERT_TASKS = (
    _INSERT_NEW
    + "WHERE NOT EXISTS (SELECT 1 FROM tombstones d WHERE d.workflow = v.workflow AND d.key = v.key) "
    "ORDER BY v.n ON CONFLICT DO NOTHING RETURNING id"
)
# Tasks without a key: each is new, so nothing is read back (an id already taken
# fails the batch, which then runs operation by operation).
_INSERT_KEYLESS = _INSERT_NEW + "ORDER BY v.n"
# The tombstone of the purged task, else the live one: one statement sees one or
# the other, or (run before a raced insert of this batch is undone) the tombstone
# and that insert, which does not answer for the key.
_EXISTING = (
    "SELECT k.workflow, k.key, coalesce(d.task_id, t.id) "
    "FROM unnest(%b::text[], %b::text[]) AS k(workflow, key) "
    "LEFT JOIN tasks t ON t.workflow = k.workflow AND t.key = k.key "
    "LEFT JOIN tombstones d ON d.workflow = k.workflow AND d.key = k.key"
)
_UNDO_INSERT = "DELETE FROM tasks WHERE id = ANY(%b::text[])"


async def insert(
    batch: PostgresBatch, items: Sequence[NewTask], inputs: Sequence[str | Exception]
) -> Second:
    """Send the insert of the tasks whose input encoded, in one statement; then one outcome per task.

    A key already used for the workflow (earlier in this batch too) or whose
    purged task's tombstone remains returns that task; an input that did not
    encode is its task's outcome. Every statement whose rows are needed (the
    insert, the tombstones, the tasks a key already names) is sent before any
    is read: one round trip.
    """
    out: list[object] = [None] * len(items)
    first: dict[tuple[str, str], int] = {}
    copies: dict[int, int] = {}
    fresh: list[tuple[int, str, NewTask, str]] = []
    for i, (item, encoded) in enumerate(zip(items, inputs, strict=True)):
        if isinstance(encoded, Exception):
            out[i] = encoded
            continue
        if item.key is not None:
            # One INSERT cannot see its own duplicates' outcome: a later
            # operation with the same key gets the first one's task.
            seen = first.get((item.workflow, item.key))
            if seen is not None:
                copies[i] = seen
                continue
            first[(item.workflow, item.key)] = i
        fresh.append((i, new_task_id(), item, encoded))
    keyless = [one for one in fresh if one[2].key is None]
    keyed = [one for one in fresh if one[2].key is not None]
    if keyless:  # written for sure if the batch commits: a lone submit waits only for that
        await batch.send(_INSERT_KEYLESS, _insert_params(batch, keyless))
    sent = None
    if keyed:
        cursor = await batch.send(_INSERT_TASKS, _insert_params(batch, keyed))
        # Sent after the insert, run after it: a purge that committed while the
        # insert waited on the purged task's key is seen here, and so is a task
        # of the key that another transaction committed meanwhile.
        keys = [(item.workflow, str(item.key)) for _, _, item, _ in keyed]
        purged = await retention.purged_keys(batch, keys)
        existing = await batch.send(_EXISTING, ([w for w, _ in keys], [k for _, k in keys]))
        sent = (cursor, purged, existing)

    async def second() -> list[object]:
        created = {task_id for _, task_id, _, _ in keyless}
        found: dict[tuple[str, str], str] = {}
        if sent is not None:
            cursor, purged, existing = sent
            inserted = {task_id for (task_id,) in await cursor.fetchall()}
            tombs = {(w, k) for w, k, _ in await purged.fetchall()}
            found = {(w, k): t for w, k, t in await existing.fetchall() if t is not None}
            raced = [
                t for _, t, item, _ in keyed if t in inserted and (item.workflow, item.key) in tombs
            ]
            if raced:  # the key's task was purged meanwhile: it still answers for the key
                await batch.send(_UNDO_INSERT, (raced,))
                inserted.difference_update(raced)
            created |= inserted
        for i, task_id, item, _ in fresh:
            if task_id in created:
                detail = dumps_detail({"workflow": item.workflow})
                batch.event(task_id, item.key, item.reply_to, EventKind.RECEIVED, detail)
                out[i] = Submitted(task_id=task_id, created=True)
            elif (other := found.get((item.workflow, str(item.key)))) is not None:
                out[i] = Submitted(task_id=other, created=False)
            else:
                out[i] = StoreUnavailableError(
                    f"a submit of a {item.workflow!r} task met a task of its key that is "
                    "gone since: nothing was written; submit again"
                )
        if created:
            batch.rings.add(ch.TASKS)
        for i, seen in copies.items():
            original = out[seen]
            out[i] = (
                Submitted(task_id=original.task_id, created=False)
                if isinstance(original, Submitted)
                else original
            )
        return out

    return second


def _insert_params(
    batch: PostgresBatch, fresh: Sequence[tuple[int, str, NewTask, str]]
) -> tuple[object, ...]:
    """The parameters of `_INSERT_NEW` for (index, task id, task, encoded input) rows."""
    now = batch.instant  # in SQL only: a lone submit need not wait for the clock
    return (
        now,
        now,
        now,
        now,
        [task_id for _, task_id, _, _ in fresh],
        [item.workflow for _, _, item, _ in fresh],
        [item.key for _, _, item, _ in fresh],
        [encoded for _, _, _, encoded in fresh],
        [item.complete_within for _, _, item, _ in fresh],
        [item.reply_to for _, _, item, _ in fresh],
        [item.trace for _, _, item, _ in fresh],
        [item.not_before for _, _, item, _ in fresh],
        [item.delay for _, _, item, _ in fresh],
        [item.deadline for _, _, item, _ in fresh],
    )
