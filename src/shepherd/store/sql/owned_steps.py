"""Steps through an exclusive agent's owner, for both backends: a key's step requests taken.

A step that calls an exclusive agent queues its request with its owning key
(`requests.owner_key`); only the key's owner takes it, fenced by its lease at
its epoch as a take of the key's calls is, and in the order the key's requests
were queued (PostgreSQL queues a key's requests one transaction at a time:
`key_lock`). Its reply is written by `ReplyAndAck`'s own handler, inside the
owner's fenced transaction (each backend's `owned_steps` module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from shepherd.store.ops import TakeKeyCalls
from shepherd.store.rows import REQUEST_COLUMNS
from shepherd.store.sql.calls import owns
from shepherd.store.sql.plan import one

if TYPE_CHECKING:
    from shepherd.core.records import Request
    from shepherd.store.ops import TakeKeyWork
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["key_calls_after", "key_lock", "take_key_steps", "work_taken"]


def key_lock(agent: str, key: str) -> str:
    """The name of the lock a transaction queueing requests of a key holds (PostgreSQL).

    Held from before the requests' ids are drawn until the commit, it queues a
    key's requests one transaction at a time: their ids rise in the order they
    commit, so any snapshot sees a key's requests as a prefix in id order, and
    its owner never takes a later one before an earlier one.
    """
    return f"shepherd.requests/{agent}/{key}"


# (agent, key, now, limit): a key's unexpired step requests, in the order queued.
_OF_KEY = (
    "SELECT id FROM requests WHERE agent = ? AND owner_key = ? AND complete_by > ? "
    "ORDER BY id LIMIT ?{for_update}"
)
# (worker, ids): leased to the owner's worker until their complete_by.
_TAKE = (
    "UPDATE requests SET taken_by = ?, visible_at = complete_by WHERE id {list} "
    f"RETURNING {REQUEST_COLUMNS}"
)


def take_key_steps(batch: Writing, ops: Sequence[TakeKeyWork]) -> Plan[list[list[Request]]]:
    """The step requests each operation's owner takes of its key (none if not its owner)."""
    d = batch.dialect
    out: list[list[Request]] = []
    for op in ops:
        if op.limit <= 0 or not (yield from owns(batch, op.agent, op.key, op.owner, op.epoch)):
            out.append([])
            continue
        skip = set(op.skip)
        # Enough rows that `limit` of them are not skipped.
        params = (op.agent, op.key, batch.now, op.limit + len(skip))
        ids = [row[0] for row in (yield from one(d.sql(_OF_KEY), params)) if row[0] not in skip]
        if not ids:
            out.append([])
            continue
        sql, listed = d.listed(_TAKE, ids[: op.limit], "bigint")
        rows = yield from one(sql, (op.worker, *listed))
        requests = [d.records.request(row) for row in rows]
        requests.sort(key=lambda r: r.id)  # RETURNING's order is not promised
        out.append(requests)
    return out


def key_calls_after(
    ops: Sequence[TakeKeyWork], steps: Sequence[list[Request]]
) -> list[TakeKeyCalls]:
    """The takes of calls for the operations that took no step (in order)."""
    return [
        TakeKeyCalls(op.agent, op.key, owner=op.owner, epoch=op.epoch, limit=op.limit)
        for op, taken in zip(ops, steps, strict=True)
        if not taken
    ]


def work_taken(steps: Sequence[list[Request]], calls: Sequence[object]) -> list[object]:
    """Each operation's (steps, calls taken, calls given up): its steps, else its calls' take."""
    taken_calls = iter(calls)
    out: list[object] = []
    for taken in steps:
        if taken:
            out.append((taken, [], []))
        else:
            out.append(([], *cast("tuple[object, object]", next(taken_calls))))
    return out
