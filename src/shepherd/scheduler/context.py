"""WorkflowContext: `await ctx.call(agent, payload)` is one checkpointed step."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.core import replay
from shepherd.core.ownership import owner_key_of
from shepherd.core.records import JsonValue, Step, Task
from shepherd.core.resources import resource_conflict
from shepherd.core.retry import RetryPolicy
from shepherd.core.states import StepKind, StepState
from shepherd.core.supervision import suspected
from shepherd.errors import (
    AgentError,
    ConfigError,
    NonDeterminismError,
    OutcomeUnknownError,
    OwnerKeyError,
    PermanentError,
    ResourceConflictError,
    ResourceError,
    StaleEpochError,
    StepBugError,
    StoreUnavailableError,
    UnknownAgentError,
)
from shepherd.failures import is_bug
from shepherd.scheduler import children, signalling, sleeping
from shepherd.scheduler.recheck import stored_outcome
from shepherd.scheduler.sending import send
from shepherd.scheduler.stops import Abandoned, StoreLost
from shepherd.scheduler.wiring import EXCLUSIVE_UNDO
from shepherd.store.contract import REPLY_GRACE, StepStart
from shepherd.tasklog import step_event

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from shepherd.agents import Agent
    from shepherd.core.resources import Resolution
    from shepherd.scheduler.parts import SchedulerParts
    from shepherd.tracing import TaskTrace


#: A step that was running at a crash may wait this many of its windows in the queue
#: for an agent that runs no other suspect (its window restarts when it is taken).
SUSPECT_QUEUE_WINDOWS = 5


@final
class WorkflowContext(children.ChildCalls):
    """What a workflow function receives: its task, and `call` to run steps.

    It runs its steps with its scheduler's parts (store, clock, agents, reply
    mailbox), never through the scheduler itself.
    """

    def __init__(self, parts: SchedulerParts, task: Task) -> None:
        self._parts = parts
        self.task = task
        self.task_id = task.id
        self.key = task.key
        self.epoch = task.lock_epoch
        self.steps: dict[int, Step] = {s.seq: s for s in task.steps}
        self._seq = 0
        #: The tasks running a forward call right now (more than one for parallel calls).
        self._in_flight: set[asyncio.Task[object]] = set()
        #: This run's span (`shepherd.tracing`), whose context each request carries.
        self.traced: TaskTrace | None = None
        signalling.entered(self)  # this run's asyncio task (and its branches) may wait_for

    async def call(
        self,
        agent: str,
        payload: JsonValue = None,
        *,
        within: float | None = None,
        undo: str | None = None,
        retry: RetryPolicy | None = None,
        entity: str | None = None,
    ) -> JsonValue:
        """Run one step through `agent` and return its JSON result.

        Args:
            agent: The registered agent's name.
            payload: The JSON request for the agent.
            within: Seconds the step may take before it is deemed failed.
            undo: The agent that compensates this step if the task is undone.
            retry: How the agent retries transient failures of this call only
                (default: the agent's own policy). It travels with the request.
            entity: The entity (a user, an order) the call is about. The app's
                resolver resolves it when the step is first sent; the resolution
                is recorded with the step and handed to the agent as
                `request.resolution` (its undo agent gets the same one). A retried
                or recovered step keeps the recorded resolution: a partition moved
                meanwhile applies to the steps that start after the move.

        Raises:
            PermanentError: The agent failed the step permanently (the service
                refused it), or `entity` cannot be resolved (the message names it;
                the cause is the resolver's `UnresolvedEntityError`), or it lives
                on another resource than the agent's `resource=` (the cause is a
                `ResourceConflictError`). No request is sent then.
            StepBugError: The agent's handler kept raising an unexpected
                exception (a bug); not a PermanentError.
            UnknownAgentError: No agent of that name is registered.
            ConfigError: `undo` names an exclusive agent (not supported yet: the
                message names the agent and why).
            TypeError: `entity` is not a str.
            ConfigError: `entity` is given and the scheduler has no resolver.
        """
        self._seq += 1
        seq = self._seq
        agents = self._parts.agents
        if agent not in agents:
            raise UnknownAgentError(agent)
        if undo is not None:
            if undo not in agents:
                raise UnknownAgentError(undo)
            _refuse_exclusive_undo(agents, undo)
        if entity is not None and not isinstance(entity, str):
            raise TypeError(f"entity must be a str, not {type(entity).__name__}")
        recorded = self.steps.get(seq)
        decision = replay.decide(recorded, agent, seq)
        if isinstance(decision, replay.Replay):
            return decision.result
        if isinstance(decision, replay.ReplayFailure):
            raise _failure(decision.error, agent, seq)
        if isinstance(decision, replay.NonDeterminism):
            raise NonDeterminismError(self.task_id, seq, decision.recorded, decision.called)
        if recorded is not None and recorded.request is not None:
            # The recorded request wins: it is the same for a deterministic workflow,
            # and it is an operator's replacement payload after `retry --step`.
            payload = recorded.request
        # Parallel calls (`asyncio.gather`) each run in a task of their own: the
        # scheduler waits for every one still in flight before the task ends.
        me = asyncio.current_task()
        if me is not None:
            self._in_flight.add(me)
        try:
            # Resolved while in flight: a workflow that fails meanwhile waits for it.
            resolution = (
                None
                if entity is None
                else await self._resolution(entity, recorded, agent, seq, decision.attempt)
            )
            return await self.run_step(
                seq=seq,
                agent=agent,
                payload=payload,
                within=within,
                attempt=decision.attempt,
                kind=StepKind.FORWARD,
                undo=undo,
                retry=None if retry is None else retry.to_json(),
                resolution=resolution,
            )
        finally:
            if me is not None:
                self._in_flight.discard(me)

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds`, durably: the task gives up its claim until then (`scheduler.sleeping`).

        Raises:
            ConfigError: `seconds` is negative, NaN, infinite or over 100 years.
        """
        self._seq += 1
        await sleeping.sleep(self, self._parts, self._seq, seconds)

    async def sleep_until(self, when: datetime) -> None:
        """Sleep until the aware instant `when`, durably, as `sleep` does.

        Raises:
            ConfigError: `when` is naive, not a datetime, or out of range.
        """
        self._seq += 1
        await sleeping.sleep_until(self, self._parts, self._seq, when)

    async def wait_for(
        self,
        name: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - durable: asyncio.timeout is not
    ) -> JsonValue:
        """Wait for signal `name` (`app.signal`), durably, holding no claim: its payload.

        Raises:
            SignalTimeoutError: `timeout` seconds passed first (None: wait until a signal).
        """
        self._seq += 1
        return await signalling.wait_for(self, self._parts, self._seq, name, timeout)

    async def _resolution(
        self, entity: str, recorded: Step | None, agent: str, seq: int, attempt: int
    ) -> Resolution:
        """The step's resolution: the one recorded with it, else the entity's now.

        Only a step's first send resolves (deterministic replay); a step recorded
        for another entity (the workflow changed) is resolved for the new one.

        Raises:
            PermanentError: The resolver cannot resolve `entity` (or refuses its name).
            StoreLost: The store failed under the resolver.
            ConfigError: The scheduler has no resolver.
        """
        if recorded is not None:
            kept = recorded.resolution
            if kept is not None and kept.entity == entity:
                return kept
        resolver = self._parts.resolver
        if resolver is None:
            raise ConfigError(
                "resolver",
                f"ctx.call({agent!r}, ..., entity={entity!r}) needs a resolver, "
                "and this scheduler has none",
            )
        try:
            resolution = await resolver.resolve(entity)
            problem = resource_conflict(self._parts.agents[agent].resource, resolution)
            if problem is not None:
                raise ResourceConflictError(agent, problem)
            return resolution
        except StoreUnavailableError as exc:
            raise StoreLost(exc) from exc
        except ResourceError as exc:
            failure = PermanentError(
                exc.message,
                agent=agent,
                seq=seq,
                detail={"type": type(exc).__name__, "message": exc.message, "entity": entity},
            )
            self._step_event(seq, agent, attempt, "failed", None, _describe(failure))
            raise failure from exc

    async def settle(self, *, cancel: bool = False) -> None:
        """Wait until no call of this workflow is in flight any more.

        A workflow that fails while parallel calls still run (`asyncio.gather`
        raises the first failure at once) leaves them running; the task must
        not end, nor its compensation be planned, before each one has an
        outcome recorded in `steps`. Their own exceptions are theirs: a call
        that failed after the first is not raised again.

        Args:
            cancel: Cancel them first (the claim is lost, or the scheduler stops).
        """
        me = asyncio.current_task()
        while others := {t for t in self._in_flight if t is not me and not t.done()}:
            if cancel:
                for other in others:
                    other.cancel()
            await asyncio.wait(others)

    async def run_step(
        self,
        *,
        seq: int,
        agent: str,
        payload: JsonValue,
        within: float | None,
        attempt: int,
        kind: StepKind,
        undo: str | None = None,
        compensates: int | None = None,
        retry: JsonValue = None,
        resolution: Resolution | None = None,
    ) -> JsonValue:
        """Record the step running, send its request, and wait for the reply.

        A step to an exclusive agent carries its owning key (its key's owner
        alone takes it); a payload that gives none fails the step at once,
        permanently, and sends nothing.
        """
        parts = self._parts
        # The agent's own settings, read here with no call: the path of every step.
        spec = parts.agents.get(agent)
        owner_key = (
            None
            if spec is None or spec.exclusive_by is None
            else self._owner_key(seq, agent, spec.exclusive_by, payload, attempt, compensates)
        )
        mailbox = parts.mailbox
        if within is not None:
            step_within = within
        elif spec is not None and spec.within is not None:
            step_within = spec.within
        else:
            step_within = parts.default_step_within
        suspect = suspected(self.task.crashes, seq)
        future = mailbox.expect(self.task_id, seq, epoch=self.epoch, attempt=attempt)
        start = StepStart(
            task_id=self.task_id,
            locked_by=parts.locked_by,
            epoch=self.epoch,
            seq=seq,
            agent=agent,
            payload=payload,
            within=step_within,
            attempt=attempt,
            kind=kind,
            undo=undo,
            compensates=compensates,
            retry=retry,
            suspect=suspect,
            queue_allowance=SUSPECT_QUEUE_WINDOWS * step_within if suspect else 0.0,
            resolution=resolution,
            # Untraced here, the run passes its submitter's context on unchanged.
            trace=self.task.trace if self.traced is None else self.traced.context,
            owner_key=owner_key,
        )
        try:
            try:
                complete_by = await send(self._parts, self.task_id, self.epoch, start)
            except StaleEpochError as exc:
                raise Abandoned from exc
            except StoreUnavailableError as exc:
                raise StoreLost(exc) from exc
            self._step_event(seq, agent, attempt, "started", compensates)
            while True:
                remaining = (complete_by - parts.store.now()).total_seconds()
                timer = parts.clock.call_later(
                    remaining + REPLY_GRACE, functools.partial(_wake, future)
                )
                try:
                    outcome = await future
                finally:
                    timer.cancel()
                if outcome is not None:
                    ok, body = outcome
                    break
                # Woken to look again: the step's window passed, or a batch of replies
                # was lost with the store. Unless a later claim of this task already
                # waits for this step, wait on a fresh future registered BEFORE the
                # store is read, so that a reply recorded meanwhile is not missed.
                if not mailbox.waits_with(self.task_id, seq, future):
                    raise Abandoned
                future = mailbox.expect(self.task_id, seq, epoch=self.epoch, attempt=attempt)
                try:
                    check = await stored_outcome(
                        parts, self.task_id, self.epoch, seq, attempt, complete_by
                    )
                except StoreUnavailableError as exc:
                    raise StoreLost(exc) from exc
                replied = future.result() if future.done() else None
                if replied is not None:
                    ok, body = replied
                    break
                if isinstance(check, tuple):
                    ok, body = check
                    break
                if check is None:
                    raise Abandoned
                complete_by = check
        finally:
            mailbox.forget(self.task_id, seq, future)
        step = Step(
            task_id=self.task_id,
            seq=seq,
            agent=agent,
            kind=kind,
            state=StepState.COMPLETED if ok else StepState.FAILED,
            attempt=attempt,
            request=payload,
            result=body if ok else None,
            error=None if ok else body,
            undo=undo,
            compensates=compensates,
            resolution=resolution,
        )
        self.steps[seq] = step
        if kind is StepKind.UNDO and ok and compensates in self.steps:
            self.steps[compensates] = replace(self.steps[compensates], state=StepState.COMPENSATED)
        if not ok:
            failure = _failure(body, agent, seq)
            self._step_event(seq, agent, attempt, "failed", compensates, _describe(failure))
            raise failure
        self._step_event(seq, agent, attempt, "completed", compensates)
        return body

    def _owner_key(
        self,
        seq: int,
        agent: str,
        exclusive_by: str | Callable[[JsonValue], object],
        payload: JsonValue,
        attempt: int,
        compensates: int | None,
    ) -> str:
        """The owning key of a step to `agent`, exclusive by `exclusive_by`.

        Raises:
            PermanentError: The payload gives no owning key (the message names the
                agent and why; the detail's type is `OwnerKeyError`).
        """
        found = owner_key_of(exclusive_by, payload)
        if isinstance(found, str):
            return found
        problem = OwnerKeyError(agent, str(found))
        failure = PermanentError(
            str(problem),
            agent=agent,
            seq=seq,
            detail={"type": "OwnerKeyError", "message": str(problem)},
        )
        self._step_event(seq, agent, attempt, "failed", compensates, _describe(failure))
        raise failure from problem

    def _step_event(
        self,
        seq: int,
        agent: str,
        attempt: int,
        event: str,
        compensates: int | None,
        reason: object = None,
    ) -> None:
        step_event(
            self.task_id,
            self.task.workflow,
            seq=seq,
            agent=agent,
            attempt=attempt,
            event=event,
            epoch=self.epoch,
            compensates=compensates,
            reason=reason,
        )


def _wake(future: asyncio.Future[tuple[bool, JsonValue] | None]) -> None:
    """Hand a waiting step a None: it looks at the store again."""
    if not future.done():
        future.set_result(None)


def _failure(error: JsonValue, agent: str, seq: int) -> PermanentError | StepBugError:
    """The exception `ctx.call` raises for a step that failed with `error`."""
    if is_bug(error):
        return StepBugError(agent=agent, seq=seq, detail=error)
    message = error.get("message") if isinstance(error, dict) else None
    unknown = isinstance(error, dict) and error.get("type") == OutcomeUnknownError.__name__
    kind = OutcomeUnknownError if unknown else PermanentError
    return kind(
        str(message) if message else f"agent {agent!r} failed step {seq}",
        agent=agent,
        seq=seq,
        detail=error,
    )


def _describe(failure: AgentError) -> str:
    """A failed step's reason for the task log: a bug says so."""
    if isinstance(failure, StepBugError):
        told = failure.detail.get("message") if isinstance(failure.detail, dict) else None
        return f"{failure.error_type}: {told} (a bug, {failure.tries} tries)"
    return f"{type(failure).__name__}: {failure.message}"


def _refuse_exclusive_undo(agents: Mapping[str, Agent], undo: str) -> None:
    """Refuse an exclusive agent as a step's undo (not supported yet), naming the agent.

    Raises:
        ConfigError: `undo` is exclusive.
    """
    if agents[undo].exclusive_by is not None:
        raise ConfigError("undo", f"agent {undo!r}: {EXCLUSIVE_UNDO}")
