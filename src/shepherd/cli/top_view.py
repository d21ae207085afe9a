"""What `shepherd top` shows: one frame read from the store, and how it is drawn with Rich.

A frame holds the tasks per `process_state`, the tasks that ended over the
last minute (by the `updated_at` the store keeps), the newest tasks in
`error` with their reason, the circuit breakers, the live workers and the
supervisor leader. `Rates` turns successive frames into tasks ended per
second since the previous frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, final

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from shepherd.cli.render import age, reason, when
from shepherd.core.breaker import BreakerState
from shepherd.core.states import ProcessState
from shepherd.core.workers import WorkerState

if TYPE_CHECKING:
    from rich.console import RenderableType

    from shepherd.core.breaker import Breaker
    from shepherd.core.records import Lease, Task
    from shepherd.operations import Operations

__all__ = ["ENDED", "Frame", "Rates", "read_frame", "render"]

#: The states a task ends in: a frame's `ended` counts the tasks in these.
ENDED = (
    ProcessState.PROCESSED,
    ProcessState.COMPENSATED,
    ProcessState.CANCELLED,
    ProcessState.ERROR,
)
#: The span of the stored throughput a frame sums up.
MINUTE = timedelta(minutes=1)
_BUCKET = timedelta(seconds=5)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Frame:
    """What one refresh of `shepherd top` read from the store.

    Attributes:
        at: The store's clock when the frame was read.
        counts: Tasks per state (every state, 0 when none).
        minute: Tasks that ended over the last minute, by how: processed,
            compensated (undone), in error (waiting for an operator), cancelled.
        minute_span: Seconds the `minute` counts cover (the buckets are aligned).
        failures: The newest tasks in `error`.
        open_alerts: Task ids with an alert not yet acknowledged.
        breakers: The circuit breakers of the remote services.
        workers_alive: Worker processes alive.
        leader: The supervisor leader's lease, or None when none leads.
    """

    at: datetime
    counts: dict[ProcessState, int]
    minute: tuple[int, int, int, int]
    minute_span: float
    failures: list[Task]
    open_alerts: frozenset[str]
    breakers: list[Breaker]
    workers_alive: int
    leader: Lease | None

    @property
    def ended(self) -> int:
        """Tasks in a state they ended in, all told."""
        return sum(self.counts[state] for state in ENDED)


async def read_frame(ops: Operations, *, failures: int = 5) -> Frame:
    """Read one frame: a few indexed reads of the store, each one transaction."""
    counted = await ops.count_tasks()
    buckets = await ops.throughput(window=MINUTE, bucket=_BUCKET)
    now = ops.now()
    errors = await ops.list_tasks(states=(ProcessState.ERROR,), limit=failures)
    alerts = await ops.alerts(open_only=True, limit=100)
    ttl = ops.settings.worker_ttl
    alive = [w for w in await ops.workers() if w.state(now=now, ttl=ttl) is WorkerState.ALIVE]
    span = (now - buckets[0].start).total_seconds() if buckets else MINUTE.total_seconds()
    return Frame(
        at=now,
        counts={state: counted.get(state, 0) for state in ProcessState},
        minute=(
            sum(b.processed for b in buckets),
            sum(b.compensated for b in buckets),
            sum(b.errors - b.compensated for b in buckets),
            sum(b.cancelled for b in buckets),
        ),
        minute_span=max(span, 1.0),
        failures=errors,
        open_alerts=frozenset(alert.task_id for alert in alerts),
        breakers=await ops.breakers(),
        workers_alive=len(alive),
        leader=await ops.leader(),
    )


@final
@dataclass(slots=True)
class Rates:
    """Tasks ended per second between successive frames (None before the second frame).

    A retried task leaves `error` and a purge removes ended tasks: the count
    of ended tasks can go down, and the rate is then 0 rather than negative.
    """

    _last: tuple[float, int] | None = field(default=None)

    def add(self, frame: Frame, *, monotonic: float) -> float | None:
        """Record `frame`, read at `monotonic` seconds; the rate since the previous one."""
        last, self._last = self._last, (monotonic, frame.ended)
        if last is None or monotonic <= last[0]:
            return None
        return max(frame.ended - last[1], 0) / (monotonic - last[0])


def render(frame: Frame, *, rate: float | None, interval: float | None) -> RenderableType:
    """The frame as Rich tables: states, throughput, failures, breakers."""
    leader = (
        "none" if frame.leader is None else f"{frame.leader.holder} (epoch {frame.leader.epoch})"
    )
    title = Text.assemble(
        ("shepherd top", "bold"), f"  {when(frame.at)}  workers alive: {frame.workers_alive}"
    )
    return Group(
        title,
        Text(f"supervisor leader: {leader}", no_wrap=True, overflow="ellipsis"),
        _states(frame),
        _throughput(frame, rate, interval),
        _failures(frame),
        _breakers(frame.breakers, frame.at),
    )


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="ellipsis", no_wrap=True)
    return table


def _states(frame: Frame) -> Table:
    table = _table("tasks by process_state", "process_state", "tasks")
    table.columns[1].justify = "right"
    for state in ProcessState:
        count = frame.counts[state]
        style = "bold red" if state is ProcessState.ERROR and count else ""
        table.add_row(str(state), Text(str(count), style=style))
    return table


#: How a task ended, for the throughput's columns: compensated (undone) is not in error.
_ENDED_AS = ("processed", "compensated", "error", "cancelled")


def _throughput(frame: Frame, rate: float | None, interval: float | None) -> Table:
    table = _table("tasks ended, by how", "over", "per second", *_ENDED_AS)
    for column in table.columns[1:]:
        column.justify = "right"
    total = sum(frame.minute)
    per_second = f"{total / frame.minute_span:.2f}"
    table.add_row("last minute", per_second, *(str(count) for count in frame.minute))
    if interval is not None:
        since = "…" if rate is None else f"{rate:.2f}"
        table.add_row(f"last {interval:g}s", since, *("" for _ in _ENDED_AS))
    return table


def _failures(frame: Frame) -> Table | Text:
    if not frame.failures:
        return Text("recent failures: none in error")
    table = _table("recent failures (newest tasks in error)", "task", "workflow", "alert", "since")
    # Fixed widths but the reason's, which takes the rest of the line: a task id is never cut.
    table.expand = True
    workflows = max(len(task.workflow) for task in frame.failures)
    for column, width in zip(table.columns, (20, min(max(workflows, 8), 24), 5, 8), strict=True):
        column.width = width
    table.add_column("reason", overflow="ellipsis", no_wrap=True, ratio=1)
    for task in frame.failures:
        table.add_row(
            task.id,
            task.workflow,
            "open" if task.id in frame.open_alerts else "",
            age(frame.at - task.updated_at),
            reason(task.error),
        )
    return table


def _breakers(breakers: list[Breaker], now: datetime) -> Table | Text:
    if not breakers:
        return Text("breakers: none yet")
    table = _table("circuit breakers", "service", "state", "failures", "opened")
    for breaker in breakers:
        style = "" if breaker.state is BreakerState.CLOSED else "bold red"
        table.add_row(
            breaker.service,
            Text(str(breaker.state), style=style),
            str(breaker.consecutive_failures),
            "" if breaker.opened_at is None else age(now - breaker.opened_at),
        )
    return table
