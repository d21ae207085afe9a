"""The request queues: agent workers take requests and answer them; how deep each queue is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.records import JsonValue, QueueDepth, Reply, Request
from shepherd.core.resources import Slot
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["QueueDepths", "Queues", "ReplyAndAck", "TakeRequests"]


@operation
class TakeRequests(Write[list[Request]]):
    """Lease up to `limit` visible, unexpired requests of these agents to `worker`.

    At most `suspects` of them (and never more than `limit` in all) may be
    requests of suspect tasks (tasks that crashed a process before); the
    others are not. A step's request to an exclusive agent (with an owner key)
    is never taken here: its key's owner takes it (`take_key_work`).
    """

    _: KW_ONLY
    agents: Sequence[str]
    worker: str
    limit: int
    suspects: int = 0


@operation
class ReplyAndAck(Write[bool | Reply]):
    """Write the reply and remove the request, together; False if it was superseded.

    A request that was superseded or expired is not replied to. True when the
    reply is queued for its task's scheduler. `slot`, a capacity slot the
    handling held, is released in the same transaction (whether the reply
    counted or not), and `signals.SLOTS` rings. With `recorder`, the
    `locked_by` name of the scheduler in the worker's own process: if that
    scheduler holds the task, the reply is recorded on its step in this
    transaction, as `record_replies` would (same checks), and returned (the
    `Reply` itself) for the worker to hand over; it is never queued. `trace`,
    the answering step span's context, is kept with the reply (`Reply.trace`).
    """

    request: Request
    _: KW_ONLY
    worker: str
    ok: bool
    body: JsonValue
    #: A capacity slot the handling held, released in the same transaction.
    slot: Slot | None = None
    #: The `locked_by` name of the scheduler in the worker's process, if one runs there.
    recorder: str | None = None
    #: The trace context of the step span that answers (`shepherd.tracing`), or None.
    trace: str | None = None


@operation
class QueueDepths(Read[list[QueueDepth]]):
    """Per agent, by name: its requests and calls waiting to be taken, and taken now.

    Only agents with something in either queue are listed. A request or a
    call counts as taken while its handling's window runs; past it (a
    handling that died), it is in neither count until the supervisor or the
    next handling moves it. Reads only the rows in flight.
    """


class Queues(Runs):
    """The store's methods for the request queues."""

    take_requests = method(TakeRequests)
    reply_and_ack = method(ReplyAndAck)
    queue_depths = method(QueueDepths)
