"""Batch handlers for the agents' request queue and the reply queue.

Requests are leased with FOR UPDATE SKIP LOCKED: workers in many processes
never take the same request at once. A reply is written and its request
removed in one transaction; a request that was superseded or expired is not
replied to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shepherd.core.records import JsonValue, Request
from shepherd.errors import PayloadError
from shepherd.store import signals as ch
from shepherd.store.postgres.rows import REQUEST_COLUMNS_R, request_from_row
from shepherd.store.postgres.tasks import limit_of

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch

__all__ = ["reply", "take"]

# (worker, agents, now, now, agents, now, now, suspects, limit): requests of healthy
# tasks, and at most `suspects` of suspect ones (tasks that crashed a process before).
_TAKE = (
    "UPDATE requests r SET taken_by = %b, visible_at = r.complete_by "
    "FROM (SELECT id FROM requests WHERE agent = ANY(%b::text[]) AND visible_at <= %b "
    "AND complete_by > %b AND (suspect = 0 OR id IN (SELECT id FROM requests "
    "WHERE agent = ANY(%b::text[]) AND suspect = 1 AND visible_at <= %b AND complete_by > %b "
    "ORDER BY id LIMIT %b)) ORDER BY id LIMIT %b FOR UPDATE SKIP LOCKED) c "
    f"WHERE r.id = c.id RETURNING {REQUEST_COLUMNS_R}"
)
_ACK = (
    "DELETE FROM requests r USING unnest(%b::bigint[], %b::text[]) AS v(id, taken_by) "
    "WHERE r.id = v.id AND r.taken_by = v.taken_by AND r.complete_by > %b "
    "RETURNING r.id, r.taken_by"
)
_INSERT_REPLIES = (
    "INSERT INTO replies (task_id, seq, attempt, lock_epoch, ok, body, created_at) "
    "SELECT v.task_id, v.seq, v.attempt, v.lock_epoch, v.ok, v.body, %b "
    "FROM unnest(%b::text[], %b::int[], %b::int[], %b::bigint[], %b::bool[], %b::text[]) "
    "WITH ORDINALITY AS v(task_id, seq, attempt, lock_epoch, ok, body, n) ORDER BY v.n"
)


async def take(
    batch: Batch, items: Sequence[tuple[tuple[str, ...], str, int, int]]
) -> list[object]:
    """Lease visible, unexpired requests until their complete_by.

    At most `suspects` of each take are requests of suspect tasks, so that an
    agent worker runs a suspect only apart from other suspects.
    """
    now = batch.now
    cursors = []
    for agents, worker, limit, suspects in items:
        names = list(agents)
        params = (worker, names, now, now, names, now, now, max(suspects, 0), limit_of(limit))
        cursors.append(await batch.send(_TAKE, params))
    out: list[object] = []
    for cursor in cursors:
        rows = await cursor.fetchall()
        rows.sort(key=lambda r: r[0])
        out.append([request_from_row(r) for r in rows])
    return out


async def reply(
    batch: Batch, items: Sequence[tuple[Request, str, bool, JsonValue]]
) -> list[object]:
    """Write replies and remove their requests; False where the request moved on."""
    encoded: list[tuple[bool, str]] = []
    for _, _, ok, body in items:
        if not ok:
            encoded.append((False, batch.dumps_error(body)))  # cut to size, never refused
            continue
        try:
            encoded.append((True, batch.dumps(body)))
        except PayloadError as exc:
            # An unencodable result is the handler's permanent failure.
            refusal = {"type": "PayloadError", "message": str(exc)}
            encoded.append((False, batch.dumps_error(refusal)))
    cursor = await batch.send(
        _ACK, ([r.id for r, _, _, _ in items], [w for _, w, _, _ in items], batch.now)
    )
    acked = {(row[0], row[1]) for row in await cursor.fetchall()}
    out: list[object] = []
    replies: list[tuple[Any, ...]] = []
    for (request, worker, _, _), (ok, body) in zip(items, encoded, strict=True):
        if (request.id, worker) not in acked:
            out.append(False)
            continue
        replies.append(
            (request.task_id, request.seq, request.attempt, request.lock_epoch, ok, body)
        )
        out.append(True)
    if replies:
        columns = [list(c) for c in zip(*replies, strict=True)]
        await batch.send(_INSERT_REPLIES, (batch.now, *columns))
        batch.rings.add(ch.REPLIES)
    return out


async def note(batch: Batch, items: Sequence[tuple[str, str, JsonValue]]) -> list[object]:
    """Append events to tasks' histories (an agent that timed out or gave up)."""
    for task_id, kind, detail in items:
        cursor = await batch.send("SELECT key, reply_to FROM tasks WHERE id = %b", (task_id,))
        row = await cursor.fetchone()
        if row is not None:
            batch.event(task_id, row[0], row[1], kind, batch.dumps_error(detail))
    return [None] * len(items)
