"""Whether a reply handed over before its commit should ride with its workflow's next write.

A reply that rides (`reply_then`) saves its own commit only when that commit
would be one: with the store's writer idle, or its queue short, the reply
alone would start a transaction of its own, and riding with the workflow's
next write saves it. A busy writer's next batch carries the reply with
hundreds of other writes anyway: riding then saves nothing, and handing it
over, holding it and settling it only costs the event loop its time.

Replies come in bursts (a batch of step starts commits, its no-op calls all
reply in the same turn of the event loop), before any of them has reached the
writer: so the replies already riding count as writes to come.
"""

from __future__ import annotations

__all__ = ["RIDE_BELOW", "rides"]

#: The writes to come (the writer's backlog and the replies riding) below which a
#: reply is offered to ride: a batch that small would be mostly a commit of its own.
RIDE_BELOW = 8


def rides(backlog: int, riding: int) -> bool:
    """Whether a reply is offered to ride its workflow's next write.

    Args:
        backlog: Writes of this process queued for the store or in flight.
        riding: Replies of this process offered to ride and not yet committed.
    """
    return backlog + riding < RIDE_BELOW
