"""What the task page shows an operator fixing a task: why it failed, and what retry and cancel do.

For a task in `error`: its reason, where (which step, which agent), the
traceback its error or its failed step's error holds (preformatted: the first
lines shown, the whole behind an expander) and how often the agent tried;
the payload each step the retry form offers would be sent with, pretty-printed,
to fill the form's box with. For any task that may be cancelled: the completed
steps the cancel will undo (by their undo agents, newest first), and those it
keeps because no agent undoes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.console.runner import reason
from shepherd.core import compensation
from shepherd.core.states import ProcessState, StepKind, StepState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from shepherd.core.records import Event, JsonValue, Step, Task

__all__ = ["Failure", "Undo", "failure_of", "prefills", "undo_plan"]

#: Lines of a traceback shown before its expander.
START_LINES = 12
#: The longest payload (pretty-printed, in characters) put in the retry form's box.
PREFILL_LIMIT = 64 * 1024
#: The events that record an agent's tries at a step.
_TRIED = frozenset({"step_gave_up", "step_timed_out"})


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """Why a task is in `error`, as the top of its page shows it."""

    reason: str
    #: The failed step (None: the workflow itself failed, or no step is named).
    step: Step | None
    #: The whole traceback, or None when the error holds none.
    traceback: str | None
    #: Its first START_LINES lines when it is longer (the rest behind the expander), else None.
    start: str | None
    #: How many lines it has.
    lines: int
    #: How often the agent ran its handler in the step's last attempt, when recorded.
    tries: int | None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Undo:
    """A completed step a cancel undoes: its seq and agent, and the agent that undoes it."""

    seq: int
    agent: str
    undo: str
    #: The step was running when the task stopped: its effect may or may not have happened.
    unknown: bool


def failure_of(task: Task, history: Sequence[Event]) -> Failure | None:
    """The failure of a task in `error` (None for a task in any other state)."""
    if task.process_state is not ProcessState.ERROR:
        return None
    error = task.error
    step = _failed_step(task)
    details = [e for e in (error, None if step is None else step.error) if isinstance(e, dict)]
    traceback = next(
        (str(e["traceback"]) for e in details if isinstance(e.get("traceback"), str)), None
    )
    if traceback is not None and not traceback.strip():
        traceback = None
    text = (traceback or "").rstrip("\n")
    lines = text.splitlines()
    start = "\n".join(lines[:START_LINES]) if len(lines) > START_LINES else None
    return Failure(
        reason=reason(error) or (reason(step.error) if step is not None else "") or "no reason",
        step=step,
        traceback=None if traceback is None else text,
        start=start,
        lines=len(lines),
        tries=_tries(details, step, history),
    )


def _failed_step(task: Task) -> Step | None:
    """The step the task's error names (`seq`), else its last failed step, else its last
    step still running (a task whose claim expired while the step ran: the step it was stuck on).
    An undo step too: a compensation that could not finish failed there.
    """
    error = task.error
    named = error.get("seq") if isinstance(error, dict) else None
    steps = {s.seq: s for s in task.steps}
    if isinstance(named, int) and named in steps:
        return steps[named]
    for state in (StepState.FAILED, StepState.RUNNING):
        found = next((s for s in reversed(steps.values()) if s.state is state), None)
        if found is not None:
            return found
    return None


def _tries(
    details: list[dict[str, JsonValue]], step: Step | None, history: Sequence[Event]
) -> int | None:
    for error in details:
        tries = error.get("tries")
        if isinstance(tries, int) and not isinstance(tries, bool):
            return tries
    if step is None:
        return None
    for event in reversed(history):
        detail = event.detail
        if event.kind in _TRIED and isinstance(detail, dict) and detail.get("seq") == step.seq:
            tries = detail.get("tries")
            return tries if isinstance(tries, int) and not isinstance(tries, bool) else None
    return None


def prefills(task: Task) -> dict[int, str]:
    """The payload of each step a retry may resubmit (any not completed, an undo step too),
    pretty-printed; "" when too long to edit.
    """
    out: dict[int, str] = {}
    for step in task.steps:
        if step.state is StepState.COMPLETED:
            continue
        text = json.dumps(step.request, indent=2, ensure_ascii=False)
        out[step.seq] = text if len(text) <= PREFILL_LIMIT else ""
    return out


def undo_plan(task: Task) -> tuple[list[Undo], list[Step]]:
    """What a cancel undoes now, newest first; and the completed steps no agent undoes (kept)."""
    done = {
        s.compensates
        for s in task.steps
        if s.kind is StepKind.UNDO and s.state is StepState.COMPLETED
    }
    forward = {s.seq: s for s in task.steps if s.kind is StepKind.FORWARD}
    try:
        planned = compensation.plan(list(forward.values()))
    except ValueError:  # two forward steps share a seq: a store never records that
        planned = []
    undo = [
        Undo(
            seq=u.compensates,
            agent=forward[u.compensates].agent,
            undo=u.agent,
            unknown=forward[u.compensates].state is StepState.RUNNING,
        )
        for u in planned
        if u.compensates not in done and forward[u.compensates].state is not StepState.COMPENSATED
    ]
    kept = [s for s in forward.values() if s.state is StepState.COMPLETED and s.undo is None]
    return undo, kept
