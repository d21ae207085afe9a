"""`ctx.run_workflow` and `ctx.start_workflow`: child workflows, carried out (`core.children`).

A child is started by one step of its parent, written with the child task in
ONE transaction (`StartChild`): replay finds the step and never starts it
twice, however the parent's process died. `start_workflow` returns the
child's id at once. `run_workflow` waits for the child's end without holding
the parent's claim: once every call of the workflow in flight waits on a
child (parallel children through `asyncio.gather`, as steps), the parent
gives up its claim (`WaitChildren`, or within `StartChild` when its only
branch starts the child) and this run stops (`WaitingChildren`). The child's
end records the parent's step in its own ending transaction and makes the
parent claimable (`EndChild`); the parent's next run replays: ended children
return their results (or raise their failures), the others wait again.

A failed child (`compensated` or `cancelled`) raises a `PermanentError`
naming the child and its reason, which the workflow may catch; uncaught, the
parent is compensated, as after a refused step.

Refused, each with nothing stored: an unknown workflow
(`UnknownWorkflowError`), a `key` that is not a str a store keeps or names
another task of the workflow, an unknown `on_parent_end`, a chain deeper than
`core.children.MAX_DEPTH` (`ConfigError`), an input that is not JSON or too
large (`PayloadError`).

While the workflow waits on children, it must await only ctx calls (and
children): other awaits (an `asyncio.sleep`) do not hold the parent's run.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from shepherd.core import children as rules
from shepherd.core.records import Step
from shepherd.core.replay import NonDeterminism, Replay, ReplayFailure
from shepherd.core.states import StepKind, StepState
from shepherd.errors import (
    ConfigError,
    NonDeterminismError,
    PermanentError,
    StaleEpochError,
    StoreUnavailableError,
    UnknownWorkflowError,
)
from shepherd.payloads import check_text
from shepherd.scheduler import replied, signalling
from shepherd.scheduler.stops import Abandoned, StoreLost
from shepherd.store.ops import EndChild, FailTask, FinishTask, StartChild, WaitChildren
from shepherd.tasklog import task_event

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task
    from shepherd.scheduler.parts import ChildSpec, SchedulerParts

__all__ = [
    "ChildCalls",
    "WaitingChildren",
    "end",
    "parent_ends",
    "run_workflow",
    "start_workflow",
]


class WorkflowContext(Protocol):
    """What a child's start and wait need of its parent's `WorkflowContext`."""

    task: Task
    task_id: str
    epoch: int
    #: The steps recorded so far, by seq.
    steps: dict[int, Step]
    #: The tasks running a call of the workflow right now.
    _in_flight: set[asyncio.Task[object]]


class ChildCalls:
    """`ctx.run_workflow` and `ctx.start_workflow`, as `WorkflowContext` has them."""

    task: Task
    task_id: str
    epoch: int
    steps: dict[int, Step]
    _in_flight: set[asyncio.Task[object]]
    _seq: int
    _parts: SchedulerParts

    async def run_workflow(
        self, workflow: str, data: JsonValue = None, *, key: str | None = None
    ) -> JsonValue:
        """Run `workflow` as a child task and return its result.

        The child is started once (a step of this workflow records it); the
        workflow waits for its end holding no claim. Children run in parallel
        through `asyncio.gather`, as steps do. Without `key`, the child's key is
        `PARENT_ID/SEQ`.

        Raises:
            PermanentError: The child ended `compensated` or `cancelled`; the
                message names it and its reason.
            UnknownWorkflowError: No workflow of that name is registered.
            ConfigError: `key` names another task of the workflow, or the chain
                of children would be deeper than 32, or it is called outside this
                workflow's own run (plain code, an agent's handler).
            PayloadError: `data` is not JSON or too large, or `key` is not a str.
        """
        signalling.refuse_outside(self, "ctx.run_workflow")
        self._seq += 1
        return await run_workflow(self, self._parts, self._seq, workflow, data, key)

    async def start_workflow(
        self,
        workflow: str,
        data: JsonValue = None,
        *,
        key: str | None = None,
        on_parent_end: str = rules.CONTINUE,
    ) -> str:
        """Start `workflow` as a child task without waiting for it: the child's id.

        When this task ends first, the child goes on (`on_parent_end="continue"`)
        or is cancelled (`"cancel"`: compensated, and ended `cancelled`).

        Raises:
            ConfigError: `on_parent_end` is neither; and as `run_workflow`.
        """
        signalling.refuse_outside(self, "ctx.start_workflow")
        self._seq += 1
        return await start_workflow(
            self, self._parts, self._seq, workflow, data, key, on_parent_end
        )


class WaitingChildren(Abandoned):
    """The parent gave up its claim until a child it awaits ends: this run stops here."""


class _Watched(set["asyncio.Task[object]"]):
    """A context's calls in flight, telling its waiting children when one leaves."""

    def __init__(self, items: set[asyncio.Task[object]], changed: asyncio.Event) -> None:
        super().__init__(items)
        self.changed = changed

    def discard(self, item: object) -> None:
        super().discard(item)
        self.changed.set()


@dataclass(eq=False)
class _Waits:
    """One run's branches waiting on children, by their seq."""

    changed: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: dict[asyncio.Task[object], int] = field(default_factory=dict)
    #: Set once one branch parks the task: how every waiting branch stops.
    parked: asyncio.Future[BaseException] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    parking: bool = False


_RUNS: weakref.WeakKeyDictionary[WorkflowContext, _Waits] = weakref.WeakKeyDictionary()


async def run_workflow(
    ctx: WorkflowContext,
    parts: SchedulerParts,
    seq: int,
    workflow: str,
    data: JsonValue,
    key: str | None,
) -> JsonValue:
    """`ctx.run_workflow(workflow, data, key=key)` at `seq`: the child's result.

    Raises:
        PermanentError: The child ended `compensated` or `cancelled` (its reason
            in the message, its error in `detail["reason"]`).
    """
    return await _child(ctx, parts, seq, workflow, data, key, rules.WAIT)


async def start_workflow(
    ctx: WorkflowContext,
    parts: SchedulerParts,
    seq: int,
    workflow: str,
    data: JsonValue,
    key: str | None,
    on_parent_end: str,
) -> str:
    """`ctx.start_workflow(...)` at `seq`: the child's id, the child started (once)."""
    problem = rules.policy_refused(on_parent_end)
    if problem is not None:
        raise ConfigError("on_parent_end", problem)
    started = await _child(ctx, parts, seq, workflow, data, key, on_parent_end)
    assert isinstance(started, str)
    return started


async def _child(
    ctx: WorkflowContext,
    parts: SchedulerParts,
    seq: int,
    workflow: str,
    data: JsonValue,
    key: str | None,
    policy: str,
) -> JsonValue:
    spec = parts.workflows.get(workflow)
    if spec is None:
        raise UnknownWorkflowError(workflow, list(parts.workflows))
    check_text("key", key)
    decision = rules.decide(ctx.steps.get(seq), seq, workflow)
    if isinstance(decision, Replay):
        return decision.result
    if isinstance(decision, ReplayFailure):
        raise _failure(decision.error, workflow, seq)
    if isinstance(decision, NonDeterminism):
        raise NonDeterminismError(ctx.task_id, seq, decision.recorded, decision.called)
    me = asyncio.current_task()
    assert me is not None
    waits = _RUNS.get(ctx)
    if waits is None:
        waits = _RUNS[ctx] = _Waits()
        ctx._in_flight = _Watched(ctx._in_flight, waits.changed)
    ctx._in_flight.add(me)
    try:
        # Let the siblings of an `asyncio.gather` reach their own calls first, so that
        # a branch does not take itself for the workflow's only one.
        await asyncio.sleep(0)
        if isinstance(decision, rules.Start):
            alone = _alone(ctx, waits, me) and policy == rules.WAIT
            child = await _start(ctx, parts, seq, workflow, data, key, policy, spec, alone)
            if policy != rules.WAIT:
                return child
            if alone:
                raise WaitingChildren
        return await _wait(ctx, parts, waits, me, seq)
    finally:
        ctx._in_flight.discard(me)


def _alone(ctx: WorkflowContext, waits: _Waits, me: asyncio.Task[object]) -> bool:
    """Whether no other call of the workflow is in flight or waiting."""
    return not any(t is not me and not t.done() for t in ctx._in_flight)


async def _start(
    ctx: WorkflowContext,
    parts: SchedulerParts,
    seq: int,
    workflow: str,
    data: JsonValue,
    key: str | None,
    policy: str,
    spec: ChildSpec,
    wait: bool,
) -> str:
    """Write `StartChild`, with the replies this workflow went on with (`reply_then`)."""
    child = rules.child_id(ctx.task_id, seq)
    if key is None:
        key = rules.default_key(ctx.task_id, seq)
    op = StartChild(
        ctx.task_id,
        locked_by=parts.locked_by,
        epoch=ctx.epoch,
        seq=seq,
        child_id=child,
        workflow=workflow,
        input=data,
        key=key,
        on_parent_end=policy,
        complete_within=spec.complete_within,
        wait=wait,
    )
    started = await _write(ctx, parts, op)
    assert isinstance(started, str)
    awaited = policy == rules.WAIT
    ctx.steps[seq] = Step(
        task_id=ctx.task_id,
        seq=seq,
        agent=workflow,
        kind=StepKind.CHILD,
        state=StepState.RUNNING if awaited else StepState.COMPLETED,
        attempt=1,
        request=rules.step_request(workflow, started, policy),
        result=None if awaited else started,
    )
    task_event(ctx.task_id, ctx.task.workflow, "child started", f"{workflow} {started} at {seq}")
    return started


async def _wait(
    ctx: WorkflowContext,
    parts: SchedulerParts,
    waits: _Waits,
    me: asyncio.Task[object],
    seq: int,
) -> JsonValue:
    """Wait, as one branch, until every call in flight waits on a child; then park the task."""
    waits.waiting[me] = seq
    waits.changed.set()
    try:
        while True:
            if waits.parking:
                stop = await asyncio.shield(waits.parked)
                raise _again(stop)
            others = [t for t in ctx._in_flight if not t.done() and t not in waits.waiting]
            if not others:
                waits.parking = True
                stop = await _park(ctx, parts, sorted(set(waits.waiting.values())))
                waits.parked.set_result(stop)
                raise stop
            waits.changed.clear()
            changed = asyncio.ensure_future(waits.changed.wait())
            try:
                await asyncio.wait({changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
    finally:
        waits.waiting.pop(me, None)


async def _park(ctx: WorkflowContext, parts: SchedulerParts, seqs: list[int]) -> BaseException:
    """Give up the claim until a child of `seqs` ends: how this run stops."""
    op = WaitChildren(ctx.task_id, locked_by=parts.locked_by, epoch=ctx.epoch, seqs=tuple(seqs))
    try:
        await _write(ctx, parts, op)
    except (Abandoned, StoreLost) as exc:
        return exc
    task_event(ctx.task_id, ctx.task.workflow, "waiting on children", f"steps {seqs}")
    return WaitingChildren()


def _again(stop: BaseException) -> BaseException:
    """The stop of a branch that did not park, as the parking branch's."""
    if isinstance(stop, StoreLost):
        return StoreLost(stop.cause)
    return type(stop)()


async def _write(
    ctx: WorkflowContext, parts: SchedulerParts, op: StartChild | WaitChildren
) -> object:
    """Write `op` for the workflow, with the replies it went on with before their commit.

    Raises:
        Abandoned: The claim moved on (or a reply did not count).
        StoreLost: The store failed under the write.
    """
    try:
        pending = (
            await replied.taken(parts, ctx.task_id, ctx.epoch)
            if ctx.task_id in parts.pending
            else None
        )
        return await replied.next_write(parts, ctx.task_id, op, pending)
    except StaleEpochError as exc:
        raise Abandoned from exc
    except StoreUnavailableError as exc:
        raise StoreLost(exc) from exc


def _failure(error: JsonValue, workflow: str, seq: int) -> PermanentError:
    """The exception a failed child's step raises in its parent."""
    message = error.get("message") if isinstance(error, dict) else None
    return PermanentError(
        str(message) if message else f"child workflow {workflow!r} of step {seq} failed",
        agent=workflow,
        seq=seq,
        detail=error,
    )


def end(parts: SchedulerParts, then: FinishTask | FailTask) -> Any:
    """Write a task's end; a child's (`core.children.may_be_child`) as `EndChild`.

    The replies the workflow went on with ride along, as with any end (`reply_then`).
    """
    if not rules.may_be_child(then.task_id):
        return replied.end(parts, then)
    return _end_child(parts, then)


async def _end_child(parts: SchedulerParts, then: FinishTask | FailTask) -> object:
    pending = (
        await replied.taken(parts, then.task_id, then.epoch)
        if then.task_id in parts.pending
        else None
    )
    return await replied.next_write(parts, then.task_id, EndChild(then), pending)


async def parent_ends(parts: SchedulerParts, ctx: WorkflowContext) -> None:
    """Before a task with children ends: cancel those that go with it (`CancelChildren`).

    Called only when `core.children.may_cancel` says some may go: a task that
    started no child (most) costs its caller a look at its steps, no call.
    """
    cancelled = await parts.store.cancel_children(
        ctx.task_id, locked_by=parts.locked_by, epoch=ctx.epoch
    )
    if cancelled:
        task_event(ctx.task_id, ctx.task.workflow, "children cancelled", ", ".join(cancelled))
