"""What the CLI prints about tasks: fitted tables for people, JSON (`--json`) for scripts.

The other listings (breakers, workers, purge) are in `render_ops`; the helpers
here (`when`, `age`, `compact`, `plain`) serve both.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from shepherd.cli.tables import Column, echo_table, terminal_width
from shepherd.console.runner import reason
from shepherd.core.records import Event, JsonValue, Step, Task
from shepherd.core.resources import Resolution
from shepherd.core.states import ProcessState
from shepherd.core.timing import LATEST_DUE

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent
    from shepherd.core.workers import Worker

__all__ = [
    "age",
    "compact",
    "echo_json",
    "plain",
    "print_task",
    "print_tasks",
    "reason",
    "resolution_rows",
    "state_of",
    "task_json",
    "tasks_json",
    "tracebacks",
    "value",
    "when",
]

_TASK_COLUMNS = (
    Column("id"),
    Column("workflow", "middle", drop=3),
    Column("key", "middle", drop=4),
    Column("state"),
    Column("fails", "middle", drop=2, right=True),
    Column("locked_by", "middle", drop=0),
    Column("updated", "middle", drop=1),
    Column("error", "wide"),
)
#: A step's agent and deadline are never cut; its error goes under it when the line is full.
_STEP_COLUMNS = (
    Column("seq", right=True),
    Column("kind", "middle"),
    Column("agent"),
    Column("state"),
    Column("agent tries", right=True),
    Column("complete_by"),
    Column("error", "wide", below=True),
)
#: What the two counters of `show` count, in the dashboard's words.
COUNTERS = "task failures: expired complete_by deadlines; agent tries: sends to the agent"
_HISTORY_COLUMNS = (Column("at"), Column("kind"), Column("detail", "wide"))
#: A step's recorded resolution: entity -> partition -> resource, then the resource's details.
_RESOLUTION_COLUMNS = (
    Column("seq", right=True),
    Column("entity", "middle", drop=1),
    Column("partition", "middle", drop=0),
    Column("resource"),
    Column("info", "wide"),
)


def task_json(task: Task, history: Sequence[Event] | None = None) -> dict[str, JsonValue]:
    """The task as a JSON object: its fields, its steps and (if given) its history."""
    data = plain(task)
    if history is not None:
        data["history"] = [plain(event) for event in history]
    return data


def tasks_json(tasks: Sequence[Task], *, more: bool) -> JsonValue:
    """`shepherd tasks --json`: the tasks, how many, and whether more matched than shown."""
    return {"tasks": [task_json(task) for task in tasks], "count": len(tasks), "more": more}


def echo_json(data: JsonValue) -> None:
    """Print one JSON document (datetimes as ISO 8601 strings)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=_default))


def print_tasks(tasks: Sequence[Task], *, now: datetime, more: bool) -> None:
    """A table of tasks, one line each, then how many were listed."""
    if not tasks:
        click.echo("no tasks")
        return
    rows = [
        (
            task.id,
            task.workflow,
            task.key or "",
            state_of(task, now=now),
            str(task.failure_count),
            task.locked_by or "",
            age(now - task.updated_at),
            reason(task.error),
        )
        for task in tasks
    ]
    echo_table(_TASK_COLUMNS, rows, terminal_width())
    count = f"{len(tasks)} task{'' if len(tasks) == 1 else 's'}"
    click.echo(f"{count} shown (more match; raise --limit)" if more else count)


def print_task(task: Task, history: Sequence[Event], *, now: datetime | None = None) -> None:
    """A task's fields, its steps, the resolutions they were sent with (if any), its history,
    then any traceback its errors hold.

    The fields' instants are dated; in the tables, an instant on the same
    (UTC) day as `now` shows its time of day only.
    """
    fields = (
        ("id", task.id),
        ("workflow", task.workflow),
        ("key", task.key or ""),
        ("process_state", str(task.process_state)),
        ("task failures", str(task.failure_count)),
        ("locked_by", task.locked_by or ""),
        ("lock_epoch", str(task.lock_epoch)),
        ("complete_by", when(task.complete_by)),
        ("not_before", when(task.not_before)),
        *(() if task.deadline is None else (("deadline", when(task.deadline)),)),
        ("reply_to", task.reply_to or ""),
        ("created_at", when(task.created_at)),
        ("updated_at", when(task.updated_at)),
        ("input", compact(task.input)),
        ("result", compact(task.result)),
        ("error", reason(task.error)),
    )
    label = max(len(name) for name, _ in fields)
    for name, text in fields:
        pad = " " * (label - len(name) + 2) if text else ""
        click.echo(f"{click.style(name, bold=True)}{pad}{text}")
    width = terminal_width()
    _section("steps")
    if task.steps:
        echo_table(_STEP_COLUMNS, [_step_row(step, now) for step in task.steps], width)
        click.echo(click.style(COUNTERS, dim=True))
    else:
        click.echo("no steps")
    resolved = resolution_rows(task)
    if resolved:
        _section("resolutions")
        echo_table(_RESOLUTION_COLUMNS, resolved, width)
    _section("history")
    if history:
        rows = [(when(e.at, today=now), e.kind, compact(e.detail)) for e in history]
        echo_table(_HISTORY_COLUMNS, rows, width)
    else:
        click.echo("no history")
    for heading, text in tracebacks(task):
        _section(heading)
        click.echo(text.rstrip("\n"))


def tracebacks(task: Task) -> list[tuple[str, str]]:
    """(heading, traceback) for each distinct traceback stored in the task's or its steps' errors."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(heading: str, error: JsonValue) -> None:
        text = error.get("traceback") if isinstance(error, dict) else None
        if isinstance(text, str) and text.strip() and text not in seen:
            seen.add(text)
            found.append((heading, text))

    for step in task.steps:
        add(f"traceback of step {step.seq} ({step.agent})", step.error)
    error = task.error
    if isinstance(error, dict):
        where = [f"step {error['seq']}" if "seq" in error else "", str(error.get("agent") or "")]
        detail = ", ".join(part for part in where if part)
        add(f"traceback of the task's error{f' ({detail})' if detail else ''}", error)
    return found


def resolution_rows(task: Task) -> list[tuple[str, str, str, str, str]]:
    """(seq, entity, partition, resource, info) of each step that has a recorded resolution.

    The resolution is the one the step was sent with (`ctx.call(..., entity=)`):
    a partition moved since does not change it.
    """
    return [
        (
            str(step.seq),
            step.resolution.entity,
            step.resolution.partition,
            step.resolution.resource.name,
            compact(step.resolution.resource.info),
        )
        for step in task.steps
        if step.resolution is not None
    ]


def _step_row(step: Step, now: datetime | None) -> tuple[str, ...]:
    return (
        str(step.seq),
        str(step.kind),
        step.agent,
        str(step.state),
        str(step.attempt),
        when(step.complete_by, today=now),
        reason(step.error),
    )


def _section(title: str) -> None:
    click.echo()
    click.echo(click.style(title, bold=True))


def state_of(task: Task, *, now: datetime) -> str:
    """A task's state; a pending task not due yet says when: `pending, due 12:30:00Z`."""
    state = str(task.process_state)
    if task.process_state is ProcessState.PENDING and task.not_before > now:
        if task.not_before >= LATEST_DUE:  # no due time: it waits (on its children)
            return f"{state}, waiting"
        return f"{state}, due {when(task.not_before, today=now)}"
    return state


def age(elapsed: timedelta) -> str:
    """How long ago, coarsely: `3s ago`, `12m ago`, `5h ago`, `2d ago`."""
    seconds = max(0, int(elapsed.total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def when(at: datetime | None, *, today: datetime | None = None) -> str:
    """An instant as `2025-01-31 12:00:00Z` (empty for None).

    With `today` (now), an instant on the same UTC day is its time of day
    only, `12:00:00Z`: a table column then keeps room for the rest.
    """
    if at is None:
        return ""
    utc = at.astimezone(UTC)
    if today is not None and utc.date() == today.astimezone(UTC).date():
        return utc.strftime("%H:%M:%SZ")
    return utc.strftime("%Y-%m-%d %H:%M:%SZ")


def compact(data: JsonValue) -> str:
    """A JSON value on one line, without spaces (empty for None)."""
    if data is None:
        return ""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_default)


def plain(
    record: Task | Step | Event | Breaker | BreakerEvent | Worker,
) -> dict[str, JsonValue]:
    """A record's fields as a JSON object (datetimes as ISO 8601, steps as objects)."""
    return {field.name: value(getattr(record, field.name)) for field in dataclasses.fields(record)}


def value(field: object) -> JsonValue:
    """One record field as JSON (a step's resolution as `Resolution.to_json` writes it)."""
    if isinstance(field, Resolution):
        return field.to_json()
    if isinstance(field, tuple):
        return [plain(item) if isinstance(item, Step) else item for item in field]
    if isinstance(field, datetime):
        return field.isoformat()
    return field


def _default(data: object) -> str:
    if isinstance(data, datetime):
        return data.isoformat()
    raise TypeError(f"{type(data).__name__} is not JSON")
