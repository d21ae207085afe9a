"""The Scheduler role: claim tasks, run their workflows, record every step.

Two loops over the store: one claims tasks in batches and starts a workflow
coroutine for each; one records agents' replies in batches and wakes the
workflows waiting on them. Both wait on in-process wake-ups, with polling as
the fallback for work written by other processes.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import TYPE_CHECKING, Any, final

from shepherd.context import Abandoned, WorkflowContext
from shepherd.core import compensation, replay
from shepherd.core.records import JsonValue, Task
from shepherd.core.states import ProcessState, StepKind
from shepherd.errors import (
    NonDeterminismError,
    OutcomeUnknownError,
    PermanentError,
    StaleEpochError,
    UnknownAgentError,
)
from shepherd.store import signals as ch
from shepherd.store.contract import REPLY_GRACE
from shepherd.store.signals import Signals

if TYPE_CHECKING:
    from shepherd.app import App
    from shepherd.store.contract import Store

log = logging.getLogger("shepherd.scheduler")


@final
class Scheduler:
    """Claims tasks atomically and drives their workflows, step by step."""

    def __init__(self, app: App, *, owner: str) -> None:
        self.app = app
        self.store: Store = app.store
        self.owner = owner
        self.settings = app.settings
        self.reply_grace = REPLY_GRACE
        #: The reply each running step waits for: (ok, body), or None when its time is up.
        self._waiting: dict[tuple[str, int], asyncio.Future[tuple[bool, JsonValue] | None]] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._slot_freed = asyncio.Event()
        self.claimed = 0
        self.finished = 0

    def default_step_within(self, agent: str) -> float:
        spec = self.app.agents.get(agent)
        if spec is not None and spec.within is not None:
            return spec.within
        return self.settings.default_step_within

    def expect_reply(self, task_id: str, seq: int) -> asyncio.Future[tuple[bool, JsonValue] | None]:
        future: asyncio.Future[tuple[bool, JsonValue] | None]
        future = asyncio.get_running_loop().create_future()
        self._waiting[(task_id, seq)] = future
        return future

    def waits_with(
        self, task_id: str, seq: int, future: asyncio.Future[tuple[bool, JsonValue] | None]
    ) -> bool:
        """Whether `future` is the one registered for the reply of step `seq`."""
        return self._waiting.get((task_id, seq)) is future

    def forget_reply(
        self, task_id: str, seq: int, future: asyncio.Future[tuple[bool, JsonValue] | None]
    ) -> None:
        # A later claim of the same task may wait on the same seq: drop only our own.
        if self.waits_with(task_id, seq, future):
            del self._waiting[(task_id, seq)]

    def statistics(self) -> dict[str, int]:
        return {
            "running": len(self._running),
            "claimed": self.claimed,
            "finished": self.finished,
            "waiting_replies": len(self._waiting),
        }

    async def run(self) -> None:
        """Run both loops until cancelled; then give unfinished tasks back."""
        replies = asyncio.create_task(self._reply_loop(), name="shepherd-replies")
        try:
            await self._claim_loop()
        finally:
            replies.cancel()
            owned = list(self._running)
            running = list(self._running.values())
            for task in running:
                task.cancel()
            await asyncio.gather(replies, *running, return_exceptions=True)
            if owned:
                await asyncio.shield(self._release(owned))

    async def _release(self, task_ids: list[str]) -> None:
        try:
            await self.store.release_tasks(task_ids, owner=self.owner)
        except Exception:  # the supervisor recovers them through complete_by anyway
            log.exception("could not release %d tasks on shutdown", len(task_ids))

    async def _claim_loop(self) -> None:
        signals: Signals = self.store.signals
        settings = self.settings
        while True:
            free = settings.max_in_flight - len(self._running)
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            wake = signals.event(ch.TASKS)
            try:
                tasks = await self.store.claim_tasks(
                    owner=self.owner, limit=min(free, settings.claim_batch)
                )
            except Exception:  # the store is down: wait, then try again
                log.exception("claim failed; retrying")
                await Signals.wait(wake, settings.poll_interval * 5)
                continue
            self.claimed += len(tasks)
            for task in tasks:
                self._running[task.id] = asyncio.create_task(self._drive(task))
            if len(tasks) < min(free, settings.claim_batch):
                await Signals.wait(wake, settings.poll_interval)

    async def _reply_loop(self) -> None:
        signals: Signals = self.store.signals
        while True:
            wake = signals.event(ch.REPLIES)
            taken = await self.store.record_replies(
                owner=self.owner, limit=self.settings.claim_batch * 4
            )
            for reply, recorded in taken:
                if not recorded:
                    continue
                future = self._waiting.get((reply.task_id, reply.seq))
                if future is not None and not future.done():
                    future.set_result((reply.ok, reply.body))
            if not taken:
                await Signals.wait(wake, self.settings.poll_interval)

    async def _drive(self, task: Task) -> None:
        ctx = WorkflowContext(self, task)
        try:
            if task.process_state is ProcessState.COMPENSATING:
                await self._compensate(ctx, task.error)
            else:
                await self._run_workflow(ctx)
        except (Abandoned, StaleEpochError):
            log.debug("task %s: claim lost, stopping silently", task.id)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug of ours must not kill the scheduler
            log.exception("task %s: scheduler failure", task.id)
        finally:
            if self._running.get(task.id) is asyncio.current_task():
                del self._running[task.id]
            self.finished += 1
            self._slot_freed.set()

    async def _run_workflow(self, ctx: WorkflowContext) -> None:
        task = ctx.task
        spec = self.app.workflows.get(task.workflow)
        if spec is None:
            await self._error(ctx, {"reason": f"unknown workflow {task.workflow!r}"})
            return
        try:
            result = await spec.fn(ctx, task.input)
        except OutcomeUnknownError as exc:
            # An effect may have happened: the operator checks before anything is undone.
            await self._error(
                ctx,
                {
                    "reason": f"step {exc.seq} ({exc.agent}) has an unknown outcome: {exc.message}",
                    "type": type(exc).__name__,
                    "seq": exc.seq,
                    "agent": exc.agent,
                    "detail": exc.detail,
                },
            )
        except PermanentError as exc:
            error = {
                "reason": f"step {exc.seq} ({exc.agent}) failed permanently: {exc.message}",
                "seq": exc.seq,
                "agent": exc.agent,
                "detail": exc.detail,
            }
            await self.store.start_compensation(
                task.id, owner=self.owner, epoch=ctx.epoch, error=error
            )
            await self._compensate(ctx, error)
        except (NonDeterminismError, UnknownAgentError) as exc:
            await self._error(ctx, {"reason": exc.message, "type": type(exc).__name__})
        except Exception as exc:
            await self._error(
                ctx,
                {
                    "reason": f"workflow raised {type(exc).__name__}: {exc}",
                    "type": type(exc).__name__,
                    "traceback": traceback.format_exc(limit=8),
                },
            )
        else:
            await self.store.finish_task(task.id, owner=self.owner, epoch=ctx.epoch, result=result)

    async def _compensate(self, ctx: WorkflowContext, reason: JsonValue) -> None:
        """Run the undo agents of the task's completed steps, newest first."""
        for undo in compensation.plan(list(ctx.steps.values())):
            recorded = ctx.steps.get(undo.seq)
            decision = replay.decide(recorded, undo.agent, undo.seq)
            if isinstance(decision, replay.Replay):
                continue
            if isinstance(decision, replay.Run):
                try:
                    await ctx.run_step(
                        seq=undo.seq,
                        agent=undo.agent,
                        payload=undo.payload,
                        within=None,
                        attempt=decision.attempt,
                        kind=StepKind.UNDO,
                        compensates=undo.compensates,
                    )
                    continue
                except PermanentError as exc:
                    error: Any = exc.detail
            else:
                error = getattr(decision, "error", repr(decision))
            await self._error(
                ctx,
                {
                    "reason": f"compensation could not finish: undo {undo.agent!r} of step "
                    f"{undo.compensates} failed",
                    "undo_error": error,
                    "cause": reason,
                },
            )
            return
        final = ProcessState.CANCELLED if ctx.task.cancel_requested else ProcessState.COMPENSATED
        await self.store.fail_task(
            ctx.task_id, owner=self.owner, epoch=ctx.epoch, state=final, error=reason
        )

    async def _error(self, ctx: WorkflowContext, error: dict[str, Any]) -> None:
        await self.store.fail_task(
            ctx.task_id, owner=self.owner, epoch=ctx.epoch, state=ProcessState.ERROR, error=error
        )
        self.app.raise_alert(ctx.task, reason=str(error.get("reason")))
