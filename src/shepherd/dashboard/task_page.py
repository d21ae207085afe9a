"""The task page: its steps as a timeline, its event history, its alert, who did what.

A task in `error` shows first why it failed, with its traceback, and the
retry form, its box filled with the failed step's payload and that step
chosen (`dashboard.failure`); the cancel button says what it will undo.

A step's `replied` time and `took` come from the history: the event that
recorded its reply, and the time since the event before it (the claim, or
the previous step's reply), which for a workflow that calls one step at a
time is how long the step took.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, final

from markupsafe import Markup

from shepherd.core.events import EventKind
from shepherd.core.operator import may_cancel, may_retry
from shepherd.core.signalling import REFUSING, waits_running
from shepherd.core.sleeping import asleep_until
from shepherd.core.states import StepState
from shepherd.dashboard import params
from shepherd.dashboard.failure import failure_of, prefills, undo_plan
from shepherd.dashboard.pages import Live, digest, fragment, live_part, render
from shepherd.errors import UnknownTaskError
from shepherd.lineage import links_of

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from shepherd.core.alerts import StoredAlert
    from shepherd.core.records import Event, JsonValue, Step, Task
    from shepherd.operations import Operations

__all__ = ["HistoryRow", "StepRow", "history_rows", "task_context", "task_page", "timeline"]

#: The template of the page's live part.
LIVE = "task_live.html"
_REPLIES = frozenset(
    {
        EventKind.STEP_COMPLETED,
        EventKind.STEP_FAILED,
        EventKind.STEP_GAVE_UP,
        EventKind.STEP_TIMED_OUT,
    }
)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StepRow:
    """One step of the timeline, with when its reply was recorded and how long it took."""

    step: Step
    replied_at: datetime | None
    took: timedelta | None
    retryable: bool


def timeline(task: Task, history: list[Event]) -> list[StepRow]:
    """The task's steps in order, each with its last reply's time and duration from the history."""
    replied: dict[int, tuple[datetime, timedelta | None]] = {}
    previous: datetime | None = None
    for event in history:
        detail = event.detail if isinstance(event.detail, dict) else {}
        seq = detail.get("seq")
        if event.kind in _REPLIES and isinstance(seq, int):
            replied[seq] = (event.at, None if previous is None else event.at - previous)
        previous = event.at
    rows = []
    for step in task.steps:
        at, took = replied.get(step.seq, (None, None))
        rows.append(
            StepRow(
                step=step,
                replied_at=at,
                took=took,
                retryable=step.state is not StepState.COMPLETED,
            )
        )
    return rows


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryRow:
    """One event of the history: its detail as shown, and a retry's replaced payload apart."""

    event: Event
    detail: JsonValue
    #: `(payload,)` for a `retried` event that replaced a step's payload, else `()`.
    replaced: tuple[JsonValue, ...]


def history_rows(history: list[Event]) -> list[HistoryRow]:
    """The history's rows: a `retried` event's replaced payload is shown on its own."""
    rows = []
    for event in history:
        detail = event.detail
        if event.kind == EventKind.RETRIED and isinstance(detail, dict) and "replaced" in detail:
            rest = {k: v for k, v in detail.items() if k != "replaced"}
            rows.append(HistoryRow(event=event, detail=rest, replaced=(detail["replaced"],)))
        else:
            rows.append(HistoryRow(event=event, detail=detail, replaced=()))
    return rows


async def task_context(ops: Operations, task_id: str) -> dict[str, Any]:
    """What the task page shows, read now.

    Raises:
        UnknownTaskError: No such task.
    """
    task = await ops.get_task(task_id)
    history = await ops.history(task_id)
    alert: StoredAlert | None = next(iter(await ops.alerts(task_id=task_id, limit=1)), None)
    actions = [
        (event, str(event.detail["by"]))
        for event in history
        if isinstance(event.detail, dict) and isinstance(event.detail.get("by"), str)
    ]
    failure = failure_of(task, history)
    failed = next((s.seq for s in reversed(task.steps) if s.state is StepState.FAILED), None)
    if failure is not None and failure.step is not None:
        failed = failure.step.seq
    payloads = prefills(task)
    undo, kept = undo_plan(task)
    return {
        "task": task,
        "steps": timeline(task, history),
        "history": history,
        "history_rows": history_rows(history),
        "alert": alert,
        "actions": actions,
        "may_retry": may_retry(task.process_state),
        "may_cancel": may_cancel(task.process_state),
        "asleep_until": asleep_until(task, now=ops.now()),
        # Signals: those sent, the waits running, and whether the task takes one.
        "signals": await ops.signals.of(task_id),
        "waiting_for": waits_running(task),
        "may_signal": task.process_state.value not in REFUSING,
        "links": await links_of(ops, task),
        "failed_seq": failed,
        "failure": failure,
        "payloads": payloads,
        # The retry form's choice and box, unless the operator's typing is shown again.
        "retry_seq": "" if failed not in payloads else str(failed),
        "prefill": payloads.get(failed, "") if failed is not None else "",
        "undo": undo,
        "kept": kept,
        "now": ops.now(),
    }


async def task_page(request: Request) -> Response:
    """GET /tasks/{id}: the task page (its live part refreshes over /live/tasks/{id})."""
    ops: Operations = request.app.state.guard.operations
    try:
        context = await task_context(ops, params.task_id(request))
    except UnknownTaskError as exc:
        return render(request, "missing.html", status=404, problem=exc.message)
    return render(
        request,
        "task.html",
        problem=None,
        task=context["task"],
        live=live_part(request, LIVE, **context),
    )


def refused_page(
    request: Request, context: dict[str, Any], *, status: int, problem: str, **typed: str
) -> Response:
    """The task page with why an action was refused, and what the operator typed kept in its form.

    The live stream starts from the digest of the part as it would be without
    what was typed, so it does not replace the form until the task changes.
    """
    shown = fragment(request, LIVE, **context, **typed)
    since = digest(fragment(request, LIVE, **context))
    live = Live(html=Markup(shown), digest=since)
    return render(
        request, "task.html", status=status, problem=problem, task=context["task"], live=live
    )
