"""Replay: what `ctx.call(agent, payload)` does at a seq, given the step recorded there.

A recorded outcome is returned (or raised) at once; an unfinished step runs again
with the next attempt number; a different agent at a recorded seq is non-determinism.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shepherd.core.states import StepKind, StepState

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Step


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """The step completed before: return its recorded result at once."""

    result: JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayFailure:
    """The step failed permanently before: raise its recorded error."""

    error: JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """The step has no outcome yet: run it, as attempt number `attempt`."""

    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NonDeterminism:
    """The workflow called `called` where `recorded` was recorded at `seq`."""

    seq: int
    recorded: str
    called: str


#: How a sleep step is named where a call was expected (and in its `agent` column).
SLEEP_NAME = "ctx.sleep"

ReplayDecision = Replay | ReplayFailure | Run | NonDeterminism


def decide(recorded: Step | None, agent: str, seq: int) -> ReplayDecision:
    """Decide what a call to `agent` at `seq` does, given the step recorded there.

    Args:
        recorded: The step recorded at `seq`, or None if there is none.
        agent: The agent the workflow calls now.
        seq: The seq of the call.

    Raises:
        ValueError: `recorded` is a step of another seq.
    """
    if recorded is None:
        return Run(attempt=1)
    if recorded.seq != seq:
        raise ValueError(f"seq {seq} does not match the recorded step's seq {recorded.seq}")
    if recorded.kind is StepKind.SLEEP:  # a sleep was recorded here (`core.sleeping`)
        return NonDeterminism(seq=seq, recorded=SLEEP_NAME, called=agent)
    if recorded.kind is StepKind.CHILD:  # a child workflow was started here (`core.children`)
        return NonDeterminism(seq=seq, recorded=f"child {recorded.agent}", called=agent)
    if recorded.agent != agent:
        return NonDeterminism(seq=seq, recorded=recorded.agent, called=agent)
    if recorded.state in (StepState.COMPLETED, StepState.COMPENSATED):
        return Replay(result=recorded.result)
    if recorded.state is StepState.FAILED:
        return ReplayFailure(error=recorded.error)
    return Run(attempt=recorded.attempt + 1)
