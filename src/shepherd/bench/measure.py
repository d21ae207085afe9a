"""What the harness measures: completion (polled, off the engine's path) and latencies.

Latencies come from the store's event log after the run: `received` (submit),
the first `claimed`, and `processed`, per task; the workloads whose client
awaits each result (W4, W6, lone) also time it on the client's clock and sum
up a sample as a `Spread`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.states import TERMINAL_STATES, ProcessState

if TYPE_CHECKING:
    from shepherd.store.contract import Store


Counts = dict[ProcessState, int]


@dataclass(slots=True)
class Polls:
    """How many `count_tasks` reads the harness made (to subtract from database counts)."""

    n: int = 0


def terminal(by_state: Counts) -> int:
    """How many tasks have ended, whatever the outcome."""
    return sum(v for k, v in by_state.items() if k in TERMINAL_STATES)


async def wait_until(
    store: Store,
    done: Callable[[Counts], bool],
    *,
    deadline: float,
    every: float = 0.05,
    alive: asyncio.Task[None] | None = None,
    polls: Polls | None = None,
) -> Counts:
    """Poll `count_tasks` every `every` s until `done(counts)`; return the last counts.

    Also returns at the monotonic `deadline`, or once the `alive` task has ended.
    Each poll is one read (one database transaction on PostgreSQL); `polls`
    counts them.
    """
    while True:
        by_state = await store.count_tasks()
        if polls is not None:
            polls.n += 1
        if done(by_state) or time.monotonic() >= deadline or (alive is not None and alive.done()):
            return by_state
        await asyncio.sleep(every)


async def unprocessed(store: Store, task_ids: Iterable[str]) -> int:
    """How many of `task_ids` are not `processed` in the store now (one read each).

    Asked of the tasks whose result a client did not see, to tell a lost task
    from a failed wait. The event log cannot say: on PostgreSQL it shows no
    event newer than the oldest transaction still open on the server.
    """
    missing = 0
    for task_id in task_ids:
        task = await store.get_task(task_id)
        if task is None or task.process_state is not ProcessState.PROCESSED:
            missing += 1
    return missing


async def charged(store: Store, task_ids: Iterable[str]) -> int:
    """How many of `task_ids` were charged a failure (`failure_count` > 0), one read each.

    A crash of a worker is not the failure of the tasks it held: a task is
    charged only when its own claim expired for want of progress.
    """
    count = 0
    for task_id in task_ids:
        task = await store.get_task(task_id)
        if task is not None and task.failure_count > 0:
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class Timeline:
    """Per-task instants read from the event log, for the tasks asked about."""

    received: dict[str, datetime]
    claimed: dict[str, datetime]
    processed: dict[str, datetime]
    #: The last supervisor `reset` of each task that had one.
    reset: dict[str, datetime]
    resets: int


async def timeline(
    store: Store,
    task_ids: Collection[str],
    *,
    complete: Collection[str] = (),
    patience: float = 10.0,
) -> Timeline:
    """Read the whole event log once and keep the instants of `task_ids`.

    `complete` names tasks the caller saw processed: the log is read on (for up
    to `patience` seconds) until each has its `received` and `processed` events.
    On PostgreSQL a reader gets an event only once no older transaction is open
    anywhere on the server, so right after a run another client's transaction
    can hold the last events back for a while.
    """
    wanted = set(task_ids)
    received: dict[str, datetime] = {}
    claimed: dict[str, datetime] = {}
    processed: dict[str, datetime] = {}
    reset: dict[str, datetime] = {}
    resets = 0
    cursor = 0
    deadline = time.monotonic() + patience
    while True:
        batch = await store.read_events(reply_to=None, after_id=cursor, limit=5000)
        if not batch:
            if all(t in received and t in processed for t in complete):
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)  # a poll of the log, with the deadline above
            continue
        cursor = batch[-1].id
        for ev in batch:
            if ev.task_id not in wanted:
                continue
            if ev.kind == EventKind.RECEIVED:
                received[ev.task_id] = ev.at
            elif ev.kind == EventKind.CLAIMED:
                claimed.setdefault(ev.task_id, ev.at)
            elif ev.kind == EventKind.PROCESSED:
                processed[ev.task_id] = ev.at
            elif ev.kind == EventKind.RESET:
                reset[ev.task_id] = ev.at
                resets += 1
    return Timeline(received, claimed, processed, reset, resets)


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q`-th percentile (0 < q <= 100); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def spans(start: dict[str, datetime], end: dict[str, datetime]) -> list[float]:
    """Seconds from `start` to `end` for every task that has both."""
    return [(end[k] - start[k]).total_seconds() for k in end if k in start]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """How many values a sample holds and where they lie, in seconds (NaN when empty)."""

    n: int
    mean_s: float
    p50_s: float
    p99_s: float
    max_s: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of `values` (seconds)."""
        listed = list(values)
        return cls(
            n=len(listed),
            mean_s=sum(listed) / len(listed) if listed else math.nan,
            p50_s=percentile(listed, 50),
            p99_s=percentile(listed, 99),
            max_s=max(listed, default=math.nan),
        )
