"""WorkflowContext: `await ctx.call(agent, payload)` is one checkpointed step."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.core import replay
from shepherd.core.records import JsonValue, Step, Task
from shepherd.core.retry import RetryPolicy
from shepherd.core.states import StepKind, StepState
from shepherd.errors import (
    NonDeterminismError,
    OutcomeUnknownError,
    PermanentError,
    StaleEpochError,
    UnknownAgentError,
)
from shepherd.store.contract import StepStart

if TYPE_CHECKING:
    from shepherd.scheduler import Scheduler


class Abandoned(BaseException):
    """The scheduler lost its claim (fenced off, or past complete_by): stop silently.

    A BaseException so that a workflow's `except Exception` cannot swallow it.
    """


@final
class WorkflowContext:
    """What a workflow function receives: its task, and `call` to run steps."""

    def __init__(self, scheduler: Scheduler, task: Task) -> None:
        self._scheduler = scheduler
        self.task = task
        self.task_id = task.id
        self.key = task.key
        self.epoch = task.lock_epoch
        self.steps: dict[int, Step] = {s.seq: s for s in task.steps}
        self._seq = 0

    async def call(
        self,
        agent: str,
        payload: JsonValue = None,
        *,
        within: float | None = None,
        undo: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> JsonValue:
        """Run one step through `agent` and return its JSON result.

        Args:
            agent: The registered agent's name.
            payload: The JSON request for the agent.
            within: Seconds the step may take before it is deemed failed.
            undo: The agent that compensates this step if the task is undone.
            retry: How the agent retries transient failures of this call only
                (default: the agent's own policy). It travels with the request.

        Raises:
            PermanentError: The agent failed the step permanently.
            UnknownAgentError: No agent of that name is registered.
        """
        self._seq += 1
        seq = self._seq
        app = self._scheduler.app
        if agent not in app.agents:
            raise UnknownAgentError(agent)
        if undo is not None and undo not in app.agents:
            raise UnknownAgentError(undo)
        recorded = self.steps.get(seq)
        decision = replay.decide(recorded, agent, seq)
        if isinstance(decision, replay.Replay):
            return decision.result
        if isinstance(decision, replay.ReplayFailure):
            raise _permanent(decision.error, agent, seq)
        if isinstance(decision, replay.NonDeterminism):
            raise NonDeterminismError(self.task_id, seq, decision.recorded, decision.called)
        if recorded is not None and recorded.request is not None:
            # The recorded request wins: it is the same for a deterministic workflow,
            # and it is an operator's replacement payload after `retry --step`.
            payload = recorded.request
        return await self.run_step(
            seq=seq,
            agent=agent,
            payload=payload,
            within=within,
            attempt=decision.attempt,
            kind=StepKind.FORWARD,
            undo=undo,
            retry=None if retry is None else retry.to_json(),
        )

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
    ) -> JsonValue:
        """Record the step running, send its request, and wait for the reply."""
        scheduler = self._scheduler
        step_within = within if within is not None else scheduler.default_step_within(agent)
        future = scheduler.expect_reply(self.task_id, seq)
        try:
            try:
                complete_by = await scheduler.store.start_step(
                    StepStart(
                        task_id=self.task_id,
                        owner=scheduler.owner,
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
                    )
                )
            except StaleEpochError as exc:
                raise Abandoned from exc
            loop = asyncio.get_running_loop()

            def expire() -> None:
                # Hand the wait a None, and register a fresh future in the same
                # callback, so that a reply arriving while we look is not missed;
                # unless a later claim of this task already waits for this step.
                nonlocal future
                if future.done():
                    return
                expired = future
                if scheduler.waits_with(self.task_id, seq, expired):
                    future = scheduler.expect_reply(self.task_id, seq)
                expired.set_result(None)

            while True:
                remaining = (complete_by - scheduler.store.now()).total_seconds()
                timer = loop.call_later(remaining + scheduler.reply_grace, expire)
                try:
                    outcome = await future
                finally:
                    timer.cancel()
                if outcome is None:
                    # A heartbeat may have moved the step's complete_by; if not, the
                    # step is past it and someone else may already be retrying it.
                    extended = await self._extended(seq, attempt, complete_by)
                    if future.done():
                        # A reply came meanwhile; or (None) nothing was re-registered.
                        outcome = future.result()
                        if outcome is None:
                            raise Abandoned
                    elif extended is None:
                        raise Abandoned
                    else:
                        complete_by = extended
                if outcome is not None:
                    ok, body = outcome
                    break
        finally:
            scheduler.forget_reply(self.task_id, seq, future)
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
        )
        self.steps[seq] = step
        if kind is StepKind.UNDO and ok and compensates in self.steps:
            self.steps[compensates] = replace(self.steps[compensates], state=StepState.COMPENSATED)
        if not ok:
            raise _permanent(body, agent, seq)
        return body

    async def _extended(self, seq: int, attempt: int, complete_by: datetime) -> datetime | None:
        """The step's later complete_by if a heartbeat moved it and the claim holds."""
        scheduler = self._scheduler
        try:
            task = await scheduler.store.get_task(self.task_id)
        except Exception:  # the supervisor recovers the task anyway
            return None
        if task is None or task.lock_epoch != self.epoch or task.locked_by != scheduler.owner:
            return None
        step = next((s for s in task.steps if s.seq == seq), None)
        if (
            step is None
            or step.state is not StepState.RUNNING
            or step.attempt != attempt
            or step.complete_by is None
            or step.complete_by <= complete_by
        ):
            return None
        return step.complete_by


def _permanent(error: JsonValue, agent: str, seq: int) -> PermanentError:
    message = error.get("message") if isinstance(error, dict) else None
    unknown = isinstance(error, dict) and error.get("type") == OutcomeUnknownError.__name__
    kind = OutcomeUnknownError if unknown else PermanentError
    return kind(
        str(message) if message else f"agent {agent!r} failed step {seq}",
        agent=agent,
        seq=seq,
        detail=error,
    )
