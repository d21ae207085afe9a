"""Compensation plan: the undo steps to run, in reverse order, when a task cannot finish."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shepherd.core.records import idempotency_key
from shepherd.core.states import StepKind, StepState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from shepherd.core.records import JsonValue, Step

#: Forward-step states whose side effect happened (completed) or may have (running).
_OUTCOMES: dict[StepState, str] = {
    StepState.COMPLETED: "completed",
    StepState.COMPENSATED: "completed",
    StepState.RUNNING: "unknown",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class UndoStep:
    """One undo to run: agent `agent` at `seq`, compensating the forward step `compensates`."""

    seq: int
    compensates: int
    agent: str
    payload: JsonValue


def plan(steps: Sequence[Step]) -> list[UndoStep]:
    """Return the undo steps for a task's recorded steps, in the order to run them.

    Every forward step with an `undo` agent whose side effect happened (`completed`,
    or already `compensated`) or may have happened (`running`: outcome unknown) is
    undone, latest first. Undo seqs follow the largest forward seq, so the plan is
    the same each time it is computed; the scheduler replays undo steps already
    recorded as completed.

    The payload of each undo is `{"request", "result", "seq", "idempotency_key",
    "outcome"}` of the step it undoes: `idempotency_key` is that step's
    (`task_id/seq`, what its handler was given and sent to its service), and
    `outcome` is `"completed"` or `"unknown"` (its result is then None: ask the
    service about the call made under that key).

    Raises:
        ValueError: Two forward steps share a seq.
    """
    forward = [step for step in steps if step.kind is StepKind.FORWARD]
    seqs = [step.seq for step in forward]
    if len(set(seqs)) != len(seqs):
        raise ValueError(f"steps: forward seqs must be unique, got {sorted(seqs)}")
    # A sleep's seq is the workflow's too: undo seqs follow it, never reuse it.
    base = max((step.seq for step in steps if step.kind is not StepKind.UNDO), default=0)
    to_undo = sorted(
        (
            (step, step.undo)
            for step in forward
            if step.undo is not None and step.state in _OUTCOMES
        ),
        key=lambda pair: pair[0].seq,
        reverse=True,
    )
    return [
        UndoStep(
            seq=base + 1 + i,
            compensates=step.seq,
            agent=undo,
            payload={
                "request": step.request,
                "result": step.result,
                "seq": step.seq,
                "idempotency_key": idempotency_key(step.task_id, step.seq),
                "outcome": _OUTCOMES[step.state],
            },
        )
        for i, (step, undo) in enumerate(to_undo)
    ]
