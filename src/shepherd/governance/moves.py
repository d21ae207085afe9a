"""The mover of a partition: drain it off its resource, then move it (`App.move_partition`).

The mover looks again and again (`Store.drain_partition`, one transaction a
look): the first look marks the partition as being moved, which stops the
steps that would start for its entities (each process's resolver holds them:
they are neither failed nor charged); every look renews the mark's lease; the
look that finds no step in flight on the old resource moves the partition, in
the same transaction. A timeout moves it anyway (`force`), reporting what was
still in flight; `now` does so at the first look. A mover that stops early
(an error, a cancellation) takes its mark off, and the partition stays where
it was; one that dies holds it for the mark's lease at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING

from shepherd.core.moves import MOVE_LEASE, MOVE_POLL, PartitionMove, check_move_timeout
from shepherd.errors import InvalidResourceError, ShepherdError
from shepherd.store.resource_rows import checked_name

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.core.moves import InFlightStep, Moving
    from shepherd.store.ops.resources import Resources

__all__ = ["checked_move", "move_partition"]


async def move_partition(
    store: Resources,
    clock: Clock,
    partition: str,
    resource: str,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - when it passes the move is made, nothing is cancelled
    now: bool = False,
    poll: float = MOVE_POLL,
    lease: float = MOVE_LEASE,
) -> PartitionMove:
    """Put `partition` on `resource` once no step is in flight on its resource.

    A partition that does not exist is created on `resource` (no step can be
    in flight for it); with `now` or a `timeout` it must exist.

    Args:
        store: The store (its resources' methods).
        clock: The clock the mover waits on between its looks.
        partition: The partition to move.
        resource: The resource it goes to.
        timeout: Seconds the mover waits at most; then it moves anyway. None: no limit.
        now: Move at once, reporting the steps still in flight.
        poll: Seconds between two looks.
        lease: Seconds the partition's mark lasts unrenewed.

    Raises:
        InvalidResourceError: `timeout` is not above 0 and finite, or is given with `now`.
        UnknownResourceError: No such resource.
        UnknownPartitionError: No such partition (with `now` or `timeout`).
        PartitionMovingError: Another move of the partition is under way.
    """
    checked_move(partition, timeout=timeout, now=now)
    holder = f"move-{secrets.token_hex(8)}"
    create = not now and timeout is None
    look = await store.drain_partition(
        partition, resource, holder=holder, lease=lease, create=create, force=now
    )
    if look.moved:
        return _report(look, waited=set(), now=now, timed_out=False)
    waited = {(step.task_id, step.seq) for step in look.in_flight}
    deadline = None if timeout is None else clock.monotonic() + timeout
    try:
        while not look.moved:
            left = None if deadline is None else deadline - clock.monotonic()
            if left is not None and left <= 0:
                look = await store.drain_partition(
                    partition, resource, holder=holder, lease=lease, force=True
                )
                return _report(look, waited=waited, now=False, timed_out=True)
            await clock.sleep(poll if left is None else min(poll, left))
            look = await store.drain_partition(partition, resource, holder=holder, lease=lease)
            waited.update((step.task_id, step.seq) for step in look.in_flight)
    except BaseException:
        # Stopped before the move: the partition stays where it was, its steps start again.
        with contextlib.suppress(ShepherdError):
            await asyncio.shield(store.end_partition_drain(partition, holder))
        raise
    return _report(look, waited=waited, now=False, timed_out=False)


def checked_move(partition: str, *, timeout: float | None, now: bool) -> None:
    """Refuse a move's bad input before anything is read or written.

    Raises:
        InvalidResourceError: The partition's name is bad, or `timeout` is not
            above 0 and finite, or is given with `now`; the message names the partition.
    """
    checked_name("partition", partition)
    problem = check_move_timeout(timeout)
    if problem is None and now and timeout is not None:
        problem = "a move made at once (now) waits for nothing: give no timeout"
    if problem is not None:
        raise InvalidResourceError(f"move of partition {partition!r}", "timeout", problem)


def _report(
    look: Moving, *, waited: set[tuple[str, int]], now: bool, timed_out: bool
) -> PartitionMove:
    in_flight: tuple[InFlightStep, ...] = look.in_flight if (now or timed_out) else ()
    return PartitionMove(
        partition=look.partition,
        previous=look.before,
        waited_for=len(waited),
        in_flight=in_flight,
        now=now,
        timed_out=timed_out,
    )
