"""What the CLI prints: Rich tables for people, JSON (`--json`) for scripts."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple

import click

from shepherd.core.breaker import Breaker, BreakerEvent, BreakerState
from shepherd.core.records import Event, JsonValue, Step, Task
from shepherd.core.workers import Worker

if TYPE_CHECKING:
    from rich.console import Console

    from shepherd.retention import Purged

__all__ = [
    "BreakerRow",
    "breakers_json",
    "echo_json",
    "print_breakers",
    "print_purged",
    "print_task",
    "print_tasks",
    "print_workers",
    "purged_json",
    "reason",
    "shorten",
    "task_json",
    "workers_json",
]

_SHORT = 60
#: Line width of tables written to a pipe or a file.
_PIPE_WIDTH = 200


def task_json(task: Task, history: Sequence[Event] | None = None) -> dict[str, JsonValue]:
    """The task as a JSON object: its fields, its steps and (if given) its history."""
    data = _plain(task)
    if history is not None:
        data["history"] = [_plain(event) for event in history]
    return data


def echo_json(value: JsonValue) -> None:
    """Print one JSON document (datetimes as ISO 8601 strings)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=_default))


def reason(error: JsonValue) -> str:
    """The human reason of a task's or step's error value, on one line."""
    if error is None:
        return ""
    if isinstance(error, dict):
        for field in ("reason", "message"):
            if field in error:
                return " ".join(str(error[field]).split())
    if isinstance(error, str):
        return " ".join(error.split())
    return json.dumps(error, ensure_ascii=False, default=_default)


def shorten(text: str, width: int = _SHORT) -> str:
    """`text` cut to `width` characters, with an ellipsis when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def print_tasks(tasks: Sequence[Task]) -> None:
    """A table of tasks, one row each."""
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=20)
    for name in ("workflow", "key", "process_state", "failure_count", "locked_by"):
        table.add_column(name, no_wrap=True, justify="right" if name == "failure_count" else "left")
    table.add_column("updated_at", no_wrap=True, min_width=20)
    table.add_column("error", overflow="fold")
    for task in tasks:
        table.add_row(
            task.id,
            task.workflow,
            task.key or "",
            str(task.process_state),
            str(task.failure_count),
            task.locked_by or "",
            _when(task.updated_at),
            shorten(reason(task.error)),
        )
    _console().print(table if tasks else "no tasks")


def print_task(task: Task, history: Sequence[Event]) -> None:
    """A task's fields, then its steps, then its history."""
    from rich.table import Table

    console = _console()
    fields = Table(box=None, show_header=False, pad_edge=False)
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    for name, value in (
        ("id", task.id),
        ("workflow", task.workflow),
        ("key", task.key or ""),
        ("process_state", str(task.process_state)),
        ("failure_count", str(task.failure_count)),
        ("locked_by", task.locked_by or ""),
        ("lock_epoch", str(task.lock_epoch)),
        ("complete_by", _when(task.complete_by)),
        ("not_before", _when(task.not_before)),
        ("reply_to", task.reply_to or ""),
        ("created_at", _when(task.created_at)),
        ("updated_at", _when(task.updated_at)),
        ("input", _compact(task.input)),
        ("result", _compact(task.result)),
        ("error", reason(task.error)),
    ):
        fields.add_row(name, value)
    console.print(fields)
    console.print()
    console.print(_steps_table(task.steps) if task.steps else "no steps")
    console.print()
    history_table = Table(title="history", title_justify="left", box=None, pad_edge=False)
    for name in ("at", "kind", "detail"):
        history_table.add_column(name, no_wrap=name != "detail")
    for event in history:
        history_table.add_row(_when(event.at), event.kind, shorten(_compact(event.detail), 80))
    console.print(history_table if history else "no history")


def _steps_table(steps: Sequence[Step]) -> object:
    from rich.table import Table

    table = Table(title="steps", title_justify="left", box=None, pad_edge=False)
    for name in ("seq", "kind", "agent", "state", "attempt", "complete_by", "error"):
        table.add_column(name, justify="right" if name in ("seq", "attempt") else "left")
    for step in steps:
        table.add_row(
            str(step.seq),
            str(step.kind),
            step.agent,
            str(step.state),
            str(step.attempt),
            _when(step.complete_by),
            shorten(reason(step.error)),
        )
    return table


class BreakerRow(NamedTuple):
    """A breaker, with its latest event when it is not closed (for the cool-down)."""

    breaker: Breaker
    latest: BreakerEvent | None

    @property
    def probe_at(self) -> datetime | None:
        """When a probe is next allowed: the end of the cool-down (None while closed).

        The cool-down is the one recorded with the breaker's latest change, i.e.
        the policy of the agent that opened it or let its probe through.
        """
        b = self.breaker
        since = b.opened_at if b.state is BreakerState.OPEN else b.probe_started_at
        detail = None if self.latest is None else self.latest.detail
        cool_down = detail.get("cool_down") if isinstance(detail, dict) else None
        if since is None or not isinstance(cool_down, int | float):
            return None
        return since + timedelta(seconds=cool_down)


def breakers_json(rows: Sequence[BreakerRow], events: Sequence[BreakerEvent]) -> JsonValue:
    """The breakers and the latest changes as one JSON object."""
    return {
        "breakers": [{**_plain(row.breaker), "probe_at": _value(row.probe_at)} for row in rows],
        "events": [_plain(event) for event in events],
    }


def print_breakers(rows: Sequence[BreakerRow], events: Sequence[BreakerEvent]) -> None:
    """A table of breakers, one row per service, then the latest changes."""
    from rich.table import Table

    console = _console()
    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("service", "state", "failures_in_a_row", "window", "opened_at", "probe_at"):
        table.add_column(
            name, no_wrap=True, justify="right" if name == "failures_in_a_row" else "left"
        )
    for row in rows:
        b = row.breaker
        table.add_row(
            b.service,
            str(b.state),
            str(b.consecutive_failures),
            f"{b.window_failures}/{b.window_calls} failed",
            _when(b.opened_at),
            _when(row.probe_at),
        )
    console.print(table if rows else "no breakers")
    if not events:
        return
    console.print()
    changes = Table(title="latest changes", title_justify="left", box=None, pad_edge=False)
    for name in ("at", "service", "change", "detail"):
        changes.add_column(name, no_wrap=name != "detail")
    for event in events:
        changes.add_row(
            _when(event.at),
            event.service,
            f"{event.from_state} -> {event.to_state}",
            shorten(_compact(event.detail), 80),
        )
    console.print(changes)


def workers_json(workers: Sequence[Worker], *, now: datetime, ttl: float) -> JsonValue:
    """The workers as a JSON array: their fields, their state and their last beat's age."""
    return [
        {
            **_plain(w),
            "state": str(w.state(now=now, ttl=ttl)),
            "beat_age": round((now - w.beat_at).total_seconds(), 3),
        }
        for w in workers
    ]


def print_workers(workers: Sequence[Worker], *, now: datetime, ttl: float) -> None:
    """A table of worker processes, one row each, with their state at `now`."""
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in ("instance", "host", "pid", "roles", "agents", "started", "last beat", "state"):
        table.add_column(
            name, no_wrap=name != "agents", justify="right" if name == "pid" else "left"
        )
    for w in workers:
        table.add_row(
            w.instance,
            w.host,
            str(w.pid),
            ",".join(w.roles),
            shorten(",".join(w.agents)),
            _when(w.started_at),
            _age(now - w.beat_at),
            str(w.state(now=now, ttl=ttl)),
        )
    _console().print(table if workers else "no workers")


def purged_json(done: Purged, ended_before: datetime | None) -> JsonValue:
    """What `shepherd purge` deleted, as a JSON object."""
    return {
        "purged": done.tasks,
        "ended_before": None if ended_before is None else ended_before.isoformat(),
        "tombstones": done.tombstones,
    }


def print_purged(done: Purged, ended_before: datetime | None) -> None:
    """What `shepherd purge` deleted, in one line."""
    since = "" if ended_before is None else f" that ended before {_when(ended_before)}"
    click.echo(
        f"purged {done.tasks} task{'' if done.tasks == 1 else 's'}{since}, "
        f"and {done.tombstones} expired key tombstone{'' if done.tombstones == 1 else 's'}"
    )


def _age(elapsed: timedelta) -> str:
    """How long ago, coarsely: `3s ago`, `12m ago`, `5h ago`, `2d ago`."""
    seconds = max(0, int(elapsed.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def _console() -> Console:
    from rich.console import Console

    # Off a terminal (pipes, files, CI logs) lines are not cut at 80 columns.
    return Console(highlight=False, width=None if sys.stdout.isatty() else _PIPE_WIDTH)


def _when(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _compact(value: JsonValue) -> str:
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_default)


def _plain(
    record: Task | Step | Event | Breaker | BreakerEvent | Worker,
) -> dict[str, JsonValue]:
    return {field.name: _value(getattr(record, field.name)) for field in dataclasses.fields(record)}


def _value(value: object) -> JsonValue:
    if isinstance(value, tuple):
        return [_plain(item) if isinstance(item, Step) else item for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")
