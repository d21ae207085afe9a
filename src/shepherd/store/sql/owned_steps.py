"""Steps through an exclusive agent's owner, for both backends: a key's step requests taken.

A step that calls an exclusive agent queues its request with its owning key
(`requests.owner_key`); only the key's owner takes it, fenced by its lease at
its epoch as a take of the key's calls is, and in the order the key's requests
were queued (PostgreSQL queues a key's requests one transaction at a time:
`key_lock`). Its reply is written by `ReplyAndAck`'s own handler, inside the
owner's fenced transaction (each backend's `owned_steps` module), or, when
the step's scheduler runs in the owner's process, with its workflow's next
write (`reply_then`, fenced the same way: `fenced_replies`). A step started
in the owner's own process may be taken by the owner's worker as it is queued
(`handed_params`): only behind the owner's fence, and when no request of the
key waits before it, so the order queued holds across processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from shepherd.store.rows import REQUEST_COLUMNS
from shepherd.store.sql.calls import answer_owned, key_calls, owns
from shepherd.store.sql.plan import one

if TYPE_CHECKING:
    from shepherd.core.records import Reply
    from shepherd.store.ops import AnswerOwned, OwnerTake, ReplyAndAck, ReplyThen, TakeKeyWork
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["HANDED", "fenced_replies", "handed_params", "key_lock", "spread", "take_key_work"]


def key_lock(agent: str, key: str) -> str:
    """The name of the lock a transaction queueing requests of a key holds (PostgreSQL).

    Held from before the requests' ids are drawn until the commit, it queues a
    key's requests one transaction at a time: their ids rise in the order they
    commit, so any snapshot sees a key's requests as a prefix in id order, and
    its owner never takes a later one before an earlier one.
    """
    return f"shepherd.requests/{agent}/{key}"


#: A keyed step's request queued taken by its key's owner's worker (leased until its
#: complete_by) where the owner holds the key's live lease at its epoch and no
#: other request of the key waits (unexpired and not that worker's); else queued
#: untaken, as any keyed request (`handed_params` gives the parameters). It returns
#: (id, taken_by): taken_by NULL when it was queued. PostgreSQL runs it holding the
#: key's lock (`key_lock`), so the requests it sees waiting are all there are.
HANDED = (
    "WITH fence AS (SELECT (EXISTS (SELECT 1 FROM owner_keys WHERE agent = ? AND key = ? "
    "AND owner = ? AND epoch = ? AND lease_until > ?{ts}{for_share}) AND NOT EXISTS "
    "(SELECT 1 FROM requests WHERE agent = ? AND owner_key = ? AND complete_by > ?{ts} "
    "AND coalesce(taken_by, '') <> ?)) AS ok) "
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, resolution, trace, owner_key, taken_by, "
    "visible_at, created_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?{ts}, ?, ?, ?, ?, ?, ?, "
    "CASE WHEN fence.ok THEN ? END, CASE WHEN fence.ok THEN ?{ts} ELSE ?{ts} END, ?{ts} "
    "FROM fence RETURNING id, taken_by"
)
_AGENT = 0
_COMPLETE_BY = 7
_OWNER_KEY = 13


def handed_params(row: Sequence[object], take: OwnerTake, now: object) -> tuple[object, ...]:
    """The parameters of HANDED for a request row of `plan_starts` (`Starts.requests`)."""
    agent, key, complete_by = row[_AGENT], row[_OWNER_KEY], row[_COMPLETE_BY]
    fence = (agent, key, take.owner, take.epoch, now, agent, key, now, take.worker)
    return (*fence, *row, take.worker, complete_by, now, now)


# (agent, key, now, limit): a key's unexpired step requests, in the order queued.
_OF_KEY = (
    "SELECT id, task_id, seq, attempt FROM requests WHERE agent = ? AND owner_key = ? "
    "AND complete_by > ? "
    "ORDER BY id LIMIT ?{for_update}"
)
# (worker, ids): leased to the owner's worker until their complete_by.
_TAKE = (
    "UPDATE requests SET taken_by = ?, visible_at = complete_by WHERE id {list} "
    f"RETURNING {REQUEST_COLUMNS}"
)


def take_key_work(batch: Writing, ops: Sequence[TakeKeyWork]) -> Plan[list[object]]:
    """Each owner's next steps of its key, else its next calls: (steps, calls, given up).

    The owner's fence is checked once; nothing is taken for a stale owner.
    """
    d = batch.dialect
    out: list[object] = []
    for op in ops:
        if op.limit <= 0 or not (yield from owns(batch, op.agent, op.key, op.owner, op.epoch)):
            out.append(([], [], []))
            continue
        skip = set(op.skip)
        # Enough rows that `limit` of them are not skipped.
        params = (op.agent, op.key, batch.now, op.limit + len(skip))
        rows = yield from one(d.sql(_OF_KEY), params)
        ids = [row[0] for row in rows if (row[0], row[1], row[2], row[3]) not in skip]
        if not ids:
            calls, given_up = yield from key_calls(batch, op.agent, op.key, op.owner, op.limit)
            out.append(([], calls, given_up))
            continue
        sql, listed = d.listed(_TAKE, ids[: op.limit], "bigint")
        taken = yield from one(sql, (op.worker, *listed))
        requests = [d.records.request(row) for row in taken]
        requests.sort(key=lambda r: r.id)  # RETURNING's order is not promised
        out.append((requests, [], []))
    return out


def fenced_replies(
    batch: Writing, ops: Sequence[ReplyThen]
) -> Plan[tuple[list[ReplyAndAck], list[int]]]:
    """Every `reply_then` operation's replies, in order, and the indexes of those to write.

    A reply an exclusive key's owner made (`ReplyThen.owned`) is written only
    where its owner still holds the key's live lease at its epoch; there its
    owner state is set first, as `ReplyOwned` sets it. The others are left out
    (`spread` gives them the outcome False: they did not count).
    """
    replies: list[ReplyAndAck] = []
    fences: list[tuple[int, AnswerOwned]] = []
    for op in ops:
        assert not op.owned or len(op.owned) == len(op.replies), "one fence (or None) per reply"
        for reply, fence in zip(op.replies, op.owned or [None] * len(op.replies), strict=True):
            if fence is not None:
                fences.append((len(replies), fence))
            replies.append(reply)
    if not fences:
        return replies, list(range(len(replies)))
    held = yield from answer_owned(batch, [fence for _, fence in fences])
    off = {i for (i, _), h in zip(fences, held, strict=True) if h is not True}
    return replies, [i for i in range(len(replies)) if i not in off]


def spread(n: int, kept: Sequence[int], answers: Sequence[object]) -> list[bool | Reply]:
    """The outcomes of `n` replies, given those of the `kept` ones (False for the others)."""
    out: list[bool | Reply] = [False] * n
    for i, answer in zip(kept, answers, strict=True):
        out[i] = cast("bool | Reply", answer)
    return out
