"""The queues' depths per agent, read at a metrics scrape (`QueueDepths`).

Both statements read only rows in flight: a request is deleted when it is
answered or its step moves on, and the calls' scan keeps to the unanswered
ones (the partial index `calls_waiting`). Instants are the database's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.store.depth_rows import queue_depths
from shepherd.store.ops import QueueDepths
from shepherd.store.postgres.reader import READS, Reader

if TYPE_CHECKING:
    from shepherd.core.records import QueueDepth

__all__ = ["depths"]

# Taken requests are hidden until their complete_by, so "live" is complete_by > now.
_REQUESTS = (
    "SELECT agent, count(*) FILTER (WHERE taken_by IS NULL), "
    "count(*) FILTER (WHERE taken_by IS NOT NULL) FROM requests "
    "WHERE complete_by > coalesce(%s::timestamptz, now()) GROUP BY agent"
)
# A taken call is hidden (visible_at) until its handling's window ends.
_CALLS = (
    "SELECT agent, count(*) FILTER (WHERE visible_at <= at), count(*) FILTER (WHERE visible_at > at) "
    "FROM calls, (SELECT coalesce(%s::timestamptz, now()) AS at) AS clock "
    "WHERE answered_at IS NULL AND expires_at > at GROUP BY agent"
)


@READS.handles(QueueDepths)
async def depths(reader: Reader, op: QueueDepths) -> list[QueueDepth]:
    """Per agent, its requests and calls waiting and taken now."""
    at = reader.clock_param()
    requests = await reader.fetch(_REQUESTS, (at,))
    calls = await reader.fetch(_CALLS, (at,))
    return queue_depths(requests, calls)
