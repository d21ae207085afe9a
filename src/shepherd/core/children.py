"""Child workflows (`ctx.run_workflow`, `ctx.start_workflow`): the rules, decided once.

A child is a task of its own, started by one step of its parent (kind
`child`, at the parent's `seq`) in the transaction that records that step, so
a replay finds the step and never starts it twice. Its id is its parent's id,
a dot, and that seq: readable, and it tells the scheduler that ends it, with
no read, that its end may have a parent to resume (the link itself is the
`task_children` row, which decides).

An awaited child (`run_workflow`, policy `wait`) leaves its step `running`
until it ends: `processed` completes the step with its result; `compensated`
or `cancelled` fails it with the child's reason, as a refused step fails
(`PermanentError`, the parent's compensation follows unless it catches it).
A child in `error` waits for an operator, and its parent with it. A started
child (`start_workflow`) completes its step at once with its id; when its
parent ends first it goes on (`continue`) or is cancelled (`cancel`), as the
call chose. Cancelling a parent cancels every unended child (and theirs).

Chains are at most `MAX_DEPTH` deep, counted from the first task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shepherd.core.replay import NonDeterminism, Replay, ReplayFailure
from shepherd.core.states import StepKind, StepState

if TYPE_CHECKING:
    from collections.abc import Iterable

    from shepherd.core.records import JsonValue, Step

__all__ = [
    "CANCEL",
    "CONTINUE",
    "MAX_DEPTH",
    "POLICIES",
    "WAIT",
    "ChildDecision",
    "ChildLink",
    "Links",
    "Start",
    "StepOutcome",
    "Waiting",
    "cancels",
    "child_id",
    "child_links",
    "decide",
    "default_key",
    "depth_refused",
    "key_taken",
    "may_be_child",
    "may_cancel",
    "parent_of",
    "policy_refused",
    "resumes",
    "step_outcome",
    "step_request",
]

#: An awaited child: its end records its parent's step and wakes the parent.
WAIT = "wait"
#: A started child that goes on when its parent ends first.
CONTINUE = "continue"
#: A started child cancelled (compensated) when its parent ends first.
CANCEL = "cancel"
#: What `start_workflow(..., on_parent_end=)` takes.
POLICIES = (CONTINUE, CANCEL)
#: The deepest chain of children: a task's child is at depth 1.
MAX_DEPTH = 32
#: The states whose child ends resume the parent (`error` waits for an operator).
_RESUMING = frozenset({"processed", "compensated", "cancelled"})
_ENDED = frozenset({"processed", "compensated", "cancelled"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildLink:
    """One parent-child link: the child, the parent's step that started it, its policy."""

    parent_id: str
    child_id: str
    seq: int
    workflow: str
    #: The child's state (`pending` when the child is unknown: purged, say).
    process_state: str
    on_parent_end: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Links:
    """A task's parent (None for a top task) and its children, by seq."""

    parent: ChildLink | None
    children: tuple[ChildLink, ...]


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What a child's end writes on its parent's step."""

    state: str
    result: JsonValue
    error: JsonValue


@dataclass(frozen=True, slots=True)
class Start:
    """No step at this seq yet: start the child."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """The child started here has not ended: wait for it (without the claim)."""


ChildDecision = Start | Waiting | Replay | ReplayFailure | NonDeterminism


def decide(recorded: Step | None, seq: int, workflow: str) -> ChildDecision:
    """What `run_workflow`/`start_workflow(workflow)` at `seq` does, given the step there.

    A finished step replays: its result (the child's, or a started child's id)
    or its failure (also once an operator's retry reset it: the child ended). Anything but a child step of that workflow is a changed
    workflow (`NonDeterminism`).
    """
    if recorded is None:
        return Start()
    if recorded.kind is not StepKind.CHILD or recorded.agent != workflow:
        called = f"child {workflow}"
        was = f"child {recorded.agent}" if recorded.kind is StepKind.CHILD else recorded.agent
        return NonDeterminism(seq=seq, recorded=was, called=called)
    if recorded.state is StepState.COMPLETED:
        return Replay(result=recorded.result)
    if recorded.state is StepState.FAILED:
        return ReplayFailure(error=recorded.error)
    if recorded.state is StepState.NOT_STARTED:
        # An operator's retry reset the failed step: its child ended, and is not started again.
        return ReplayFailure(
            error={
                "type": "ChildFailed",
                "message": f"the child of step {seq} ended before the retry: "
                "a retry does not start a child again",
                "child": None
                if not isinstance(recorded.request, dict)
                else recorded.request.get("child"),
            }
        )
    return Waiting()


def child_id(parent_id: str, seq: int) -> str:
    """The id of the child started by step `seq` of `parent_id`."""
    return f"{parent_id}.{seq}"


def parent_of(task_id: str) -> tuple[str, int] | None:
    """The parent's id and the seq of its step that started `task_id`, if a child's id."""
    parent, dot, seq = task_id.rpartition(".")
    if not dot or not parent or not seq.isdigit():
        return None
    return parent, int(seq)


def child_links(parent_id: str, steps: Iterable[Step]) -> list[tuple[int, str, str, str]]:
    """`(seq, child id, workflow, policy)` of each child a task's `steps` started, by seq."""
    out = []
    for step in steps:
        request = step.request
        if step.kind is StepKind.CHILD and isinstance(request, dict):
            child = request.get("child")
            policy = request.get("on_parent_end")
            if isinstance(child, str) and isinstance(policy, str):
                out.append((step.seq, child, step.agent, policy))
    return sorted(out)


def may_be_child(task_id: str) -> bool:
    """Whether `task_id` can name a child (a dot in it): only then is its end looked up."""
    return "." in task_id


def default_key(parent_id: str, seq: int) -> str:
    """A child's key when its call gives none: from its parent and step, deterministic."""
    return f"{parent_id}/{seq}"


def policy_refused(policy: object) -> str | None:
    """Why `on_parent_end=policy` is refused, or None."""
    if policy in POLICIES:
        return None
    return f"on_parent_end must be one of {', '.join(map(repr, POLICIES))}, not {policy!r}"


def depth_refused(depth: int) -> str | None:
    """Why a child at `depth` is refused (a chain too deep), or None."""
    if depth <= MAX_DEPTH:
        return None
    return (
        f"a chain of child workflows may be at most {MAX_DEPTH} deep: this child "
        f"would be at depth {depth}"
    )


def key_taken(workflow: str, key: str, task_id: str) -> str:
    """Why a child's `key=` already used by another task of its workflow is refused."""
    return (
        f"key {key!r} of workflow {workflow!r} already names task {task_id}, "
        "which this step did not start: a child needs a key of its own"
    )


def step_request(workflow: str, child: str, policy: str) -> JsonValue:
    """The `request` recorded on the parent's child step: which child, and its policy."""
    return {"workflow": workflow, "child": child, "on_parent_end": policy}


def resumes(state: str) -> bool:
    """Whether a child ending in `state` records its parent's step and wakes it."""
    return state in _RESUMING


def step_outcome(child: str, state: str, result: JsonValue, error: JsonValue) -> StepOutcome:
    """The parent's step once its child `child` ended in `state` with `result` or `error`."""
    if state == "processed":
        return StepOutcome("completed", result, None)
    reason = error.get("reason") if isinstance(error, dict) else None
    told = f": {reason}" if reason else ""
    return StepOutcome(
        "failed",
        None,
        {
            "type": "ChildFailed",
            "message": f"child task {child} ended {state}{told}",
            "child": child,
            "state": state,
            "reason": error,
        },
    )


def may_cancel(steps: Iterable[Step]) -> bool:
    """Whether a task whose steps are `steps` may have children to cancel as it ends.

    Only a child started with `cancel`, or an awaited one whose step still runs:
    a parent whose children all ended, or go on, writes nothing for them.
    """
    child = StepKind.CHILD
    for step in steps:
        if step.kind is not child:
            continue
        if step.state is StepState.RUNNING:
            return True
        request = step.request
        if isinstance(request, dict) and request.get("on_parent_end") == CANCEL:
            return True
    return False


def cancels(policy: str, state: str, *, everything: bool) -> bool:
    """Whether a child of policy `policy`, now `state`, is cancelled as its parent ends.

    `everything`: the parent is cancelled (or was itself cancelled with its own
    parent), so every unended child goes; otherwise only those started with
    `cancel`, and awaited ones still running (a parent that ends no longer
    waits for them).
    """
    if state in _ENDED or state == "compensating":
        return False
    return everything or policy in (CANCEL, WAIT)
