"""The Scheduler role: claim tasks, run their workflows, record every step.

Two loops over the store: one claims tasks in batches and starts a workflow
coroutine for each; one records agents' replies in batches and posts them to the
reply mailbox the workflows' steps wait on. Both wait on in-process wake-ups, with
polling as the fallback for work written by other processes; the polling, and
each step's wait for its reply, run on the app's clock. How a task ends once its
workflow returns or raises is `ending`'s.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, final

from shepherd import tracing
from shepherd.core.claiming import peek_limit
from shepherd.core.records import JsonValue, Reply, Task
from shepherd.core.states import ProcessState
from shepherd.errors import CommitUnknownError, StaleEpochError, StoreUnavailableError
from shepherd.idle import IdleBackoff
from shepherd.metrics import Metrics, WorkflowCounters
from shepherd.outage import Outage
from shepherd.scheduler import ending, replied
from shepherd.scheduler.context import WorkflowContext
from shepherd.scheduler.mailbox import ReplyMailbox
from shepherd.scheduler.parts import Claim, Owners, SchedulerParts, Taker
from shepherd.scheduler.recheck import held_again
from shepherd.scheduler.stops import Abandoned, StoreLost
from shepherd.store import signals as ch
from shepherd.store.signals import Signals
from shepherd.tasklog import task_event, task_fields

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from shepherd.agents import Agent
    from shepherd.agents.pending import PendingReply
    from shepherd.alerts import RaiseAlert
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.governance.resolver import Resolver
    from shepherd.registry import Standing
    from shepherd.scheduler.workflow import Workflow
    from shepherd.store.roles import SchedulerStore

__all__ = ["Scheduler", "Taker"]

log = logging.getLogger("shepherd.scheduler")


@final
class Scheduler:
    """Claims tasks atomically and drives their workflows, step by step.

    Args:
        store: The store, as the scheduler uses it.
        owner: This scheduler's name in the claims it takes (`locked_by`).
        settings: Batch sizes, concurrency, polling and default step windows.
        clock: What polling and each step's wait for its reply run on.
        workflows: The registered workflows, by name, whose functions it runs.
        agents: The registered agents, by name: the only ones a step may call.
        raise_alert: How a task that ends in `error` reaches an operator.
        resolver: Where the entities of `ctx.call(..., entity=...)` live (the
            App's `resolver`); None: a call naming an entity fails the task.
        metrics: Where claim lags and task ends are counted (the App's; a
            registry of its own when None).
    """

    def __init__(
        self,
        store: SchedulerStore,
        *,
        owner: str,
        settings: Settings,
        clock: Clock,
        workflows: Mapping[str, Workflow],
        agents: Mapping[str, Agent],
        raise_alert: RaiseAlert,
        resolver: Resolver | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.counters = WorkflowCounters(Metrics() if metrics is None else metrics)
        self.settings = settings
        self.workflows = workflows
        #: Where each running step waits for its reply: the reply loop posts there.
        self.mailbox = ReplyMailbox()
        #: What the contexts of its workflows run their steps with.
        self.parts = SchedulerParts(
            store=store,
            locked_by=owner,
            clock=clock,
            agents=agents,
            default_step_within=settings.default_step_within,
            resolver=resolver,
            counters=self.counters,
            raise_alert=raise_alert,
            mailbox=self.mailbox,
            workflows=workflows,
        )
        self._running: dict[str, asyncio.Task[None]] = {}
        self._slot_freed = asyncio.Event()
        #: Whether the last peek saw a task it leaves to a claim (a compensating one).
        self._claim_after_peek = False
        #: Whether the last look at the queue found all it asked for (`core.claiming`).
        self._deep = False
        self.claimed = 0
        self.finished = 0
        #: Times a workflow was driven again after the store failed under it.
        self.redriven = 0
        #: Times a workflow went on after a reply came for a step it had given up.
        self.resumed = 0
        #: Whether `run` runs (only then does a late reply resume its workflow).
        self._serving = False
        self.clock = clock
        self.claims_outage = Outage("scheduler claims", log=log, clock=clock, watch=store.watch)
        self.replies_outage = Outage("scheduler replies", log=log, clock=clock, watch=store.watch)
        self.tasks_outage = Outage("scheduler task writes", log=log, clock=clock, watch=store.watch)
        #: Whether this process may claim (its heartbeats reach the store); None: always.
        self.standing: Standing | None = None

    @property
    def taker(self) -> Taker | None:
        """The agent worker of this process, if one runs here: steps of the agents it
        hosts go straight to it (`WorkflowContext._send`)."""
        return self.parts.taker

    @taker.setter
    def taker(self, taker: Taker | None) -> None:
        self.parts.taker = taker

    @property
    def owners(self) -> Owners | None:
        """The exclusive owners of this process, if its agent role runs here: steps to
        a key owned here go straight to the key's loop (`scheduler.owned`)."""
        return self.parts.owners

    @owners.setter
    def owners(self, owners: Owners | None) -> None:
        self.parts.owners = owners

    def recheck(self, task_id: str, seq: int) -> None:
        """Wake the step waiting for `(task_id, seq)` to read it from the store again.

        For an agent worker of this process whose recorded reply's commit was lost
        with the connection: it may have been recorded, and no reply follows.
        """
        self.mailbox.recheck(task_id, seq)

    def offer(self, pending: PendingReply) -> bool:
        """Hand a reply not yet committed to the step waiting for it under its claim and attempt.

        False when none waits (the reply is committed alone, as any other). Handed
        over, it waits for its workflow's next write of the task to take it
        (`scheduler.replied`), or for its worker to withdraw it.
        """
        request = pending.op.request
        task_id, seq = request.task_id, request.seq
        mailbox = self.mailbox
        if not mailbox.waits_for(task_id, seq, epoch=request.lock_epoch, attempt=request.attempt):
            return False
        self.parts.pending.setdefault(task_id, []).append(pending)
        mailbox.post(task_id, seq, (pending.op.ok, pending.body))
        return True

    def statistics(self) -> dict[str, int]:
        return {
            "running": len(self._running),
            "claimed": self.claimed,
            "finished": self.finished,
            "waiting_replies": len(self.mailbox),
            "redriven": self.redriven,
            "resumed": self.resumed,
        }

    async def run(self) -> None:
        """Run both loops until cancelled; then give unfinished tasks back.

        Neither loop ends on its own: if one does (a bug), the other is stopped
        and the error propagates, so that the process stops with the reason.
        """
        claims = asyncio.create_task(self._claim_loop(), name="shepherd-claims")
        replies = asyncio.create_task(self._reply_loop(), name="shepherd-replies")
        self._serving = True
        try:
            done, _ = await asyncio.wait({claims, replies}, return_when=asyncio.FIRST_COMPLETED)
            ended = done.pop()
            name = "claim" if ended is claims else "reply"
            if ended.cancelled():
                raise RuntimeError(f"the scheduler's {name} loop was cancelled")
            exc = ended.exception()
            if exc is not None:
                raise exc
            raise RuntimeError(f"the scheduler's {name} loop returned")
        finally:
            self._serving = False
            claims.cancel()
            replies.cancel()
            await asyncio.gather(claims, return_exceptions=True)
            owned = list(self._running)
            running = list(self._running.values())
            for task in running:
                task.cancel()
            await asyncio.gather(replies, *running, return_exceptions=True)
            if owned:
                await asyncio.shield(self._release(owned))

    async def _release(self, task_ids: list[str]) -> None:
        try:
            await self.store.release_tasks(task_ids, locked_by=self.owner)
        except Exception:  # the supervisor recovers them through complete_by anyway
            log.exception("could not release %d tasks on shutdown", len(task_ids))

    async def _claim_loop(self) -> None:
        signals: Signals = self.store.signals
        settings = self.settings
        backoff = IdleBackoff(settings.poll_interval, settings.idle_poll_cap)
        while True:
            free = settings.max_in_flight - len(self._running)
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            if self.standing is not None and not self.standing.takes_work():
                await self.standing.wait_takes_work()
                continue
            wake = signals.event(ch.TASKS)
            limit = min(free, settings.claim_batch)
            peek = peek_limit(len(self._running), limit, deep=self._deep)
            tasks = []
            try:
                if peek and await self._peek(peek):
                    if self._deep or self._claim_after_peek:
                        continue
                    # Every task due found: the next look waits for a wake-up (since `wake`).
                    self.claims_outage.over(wrote=False)
                    backoff.next(found=True)
                    await self.clock.wait_event(wake, settings.poll_interval)
                    continue
                if not peek or self._claim_after_peek:
                    # Not the tasks peeked at: their first writes claim them.
                    tasks = await self.store.claim_tasks(
                        locked_by=self.owner, limit=limit, skip=list(self.parts.claiming)
                    )
                    self._deep = len(tasks) >= limit
            except StoreUnavailableError as exc:  # wait it out; anything else stops us
                await self.claims_outage.pause(exc)
                continue
            self.claims_outage.over(wrote=not peek)
            self.claimed += len(tasks)
            for task in tasks:
                # The claim wrote updated_at: how late after not_before it came.
                self.counters.claimed(
                    task.workflow, (task.updated_at - task.not_before).total_seconds()
                )
                task_event(
                    task.id,
                    task.workflow,
                    "claimed to compensate"
                    if task.process_state is ProcessState.COMPENSATING
                    else "claimed",
                    f"lock_epoch {task.lock_epoch}, failure_count {task.failure_count}",
                    epoch=task.lock_epoch,
                )
                self._running[task.id] = asyncio.create_task(self._drive(task))
            wait = backoff.next(found=len(tasks) > 0)
            if len(tasks) < limit:
                if wait > settings.poll_interval:
                    wait = await self._until_due(wait)
                await self.clock.wait_event(wake, wait)

    async def _peek(self, limit: int) -> bool:
        """Peek at up to `limit` tasks and drive the pending ones not running here yet, each
        claimed by its first write (`core.claiming`); whether there were any.

        A compensating task among them, or one a run of this scheduler that lost
        its claim still stands for, is left to a claim of its own (`_claim_after_peek`).
        """
        # The tasks peeked at before whose first writes have not committed are pending
        # still, and found again: asked for on top, and left out. Then one more than it
        # drives: found, more wait, and claims of their own take them.
        claiming = self.parts.claiming
        found = await self.store.peek_tasks(limit=limit + 1 + len(claiming))
        found = [t for t in found if t.id not in claiming]
        self._deep = len(found) > limit
        found = found[:limit]
        peeked = [
            t
            for t in found
            if t.process_state is ProcessState.PENDING and t.id not in self._running
        ]
        # A compensating task, or one an earlier run here still stands for (its claim
        # lost meanwhile), is claimed as before: a claim of its own starts it anew.
        self._claim_after_peek = any(
            t.process_state is not ProcessState.PENDING or t.id in self._running for t in found
        )
        for task in peeked:
            held = replace(
                task,
                locked_by=self.owner,
                lock_epoch=task.lock_epoch + 1,
                process_state=ProcessState.PROCESSING,
            )
            self.parts.claiming[task.id] = Claim(
                task.lock_epoch, functools.partial(self._claimed, held)
            )
            self._running[task.id] = asyncio.create_task(self._drive(held))
        return bool(peeked)

    def _claimed(self, task: Task) -> None:  # a peeked task's first write claimed it
        self.claimed += 1
        self.counters.claimed(task.workflow, (self.store.now() - task.not_before).total_seconds())
        task_event(
            task.id,
            task.workflow,
            "claimed",
            f"lock_epoch {task.lock_epoch}, failure_count {task.failure_count}",
            epoch=task.lock_epoch,
        )

    async def _until_due(self, wait: float) -> float:
        """`wait`, or less if a task's `not_before` passes sooner (no wake-up rings then)."""
        floor = self.settings.poll_interval
        try:
            due = await self.store.next_due()
        except StoreUnavailableError:
            return floor  # the claim that follows meets the outage and waits it out
        if due is None:
            return wait
        return max(min(wait, (due - self.store.now()).total_seconds()), floor)

    async def _reply_loop(self) -> None:
        signals: Signals = self.store.signals
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        while True:
            wake = signals.event(ch.REPLIES)
            try:
                taken = await self.store.record_replies(
                    locked_by=self.owner, limit=self.settings.claim_batch * 4
                )
            except StoreUnavailableError as exc:
                if isinstance(exc, CommitUnknownError):
                    # Replies may have been taken and recorded, their wake-ups lost
                    # with the connection: every waiting step looks at the store.
                    self.mailbox.recheck_all()
                await self.replies_outage.pause(exc)
                continue
            self.replies_outage.over()
            for reply, recorded in taken:
                if recorded:
                    self.deliver(reply)
            wait = backoff.next(found=bool(taken))
            if not taken:
                await self.clock.wait_event(wake, wait)

    def deliver(self, reply: Reply) -> None:
        """Hand a recorded reply to the step waiting for it (none waits: nothing to do).

        The reply loop calls it for the replies it recorded; an agent worker in
        this process, for those its own transaction recorded (`recorder`).
        """
        if tracing.ENABLED and reply.trace is not None and tracing.active():
            tracing.replied(reply)
        if self.mailbox.post(reply.task_id, reply.seq, (reply.ok, reply.body)):
            return
        if reply.task_id not in self._running and self._serving:
            # Recorded under this claim after its step was given up (its agent was
            # frozen past the step's window, say): the claim still holds, and the
            # record moved its complete_by on. Go on with the workflow rather than
            # leave the claim to expire with its step done.
            self._running[reply.task_id] = asyncio.create_task(self._resume(reply))

    async def _resume(self, reply: Reply) -> None:
        """Drive the task of a reply that came after its step was given up, if still ours."""
        task: Task | None = None
        try:
            task = await self.store.get_task(reply.task_id)
        except StoreUnavailableError:
            pass  # the claim expires, and the supervisor decides
        finally:
            ours = (
                task is not None
                and task.locked_by == self.owner
                and task.lock_epoch == reply.lock_epoch
                and task.process_state in (ProcessState.PROCESSING, ProcessState.COMPENSATING)
            )
            if not ours and self._running.get(reply.task_id) is asyncio.current_task():
                del self._running[reply.task_id]
                self._slot_freed.set()
        if task is not None and ours:
            self.resumed += 1
            log.info(
                "task %s: step %d was recorded after it was given up; continuing",
                task.id,
                reply.seq,
                extra=_fields(task),
            )
            await self._drive(task)

    async def _drive(self, task: Task) -> None:
        current: Task | None = task
        try:
            while current is not None:
                try:
                    await self._drive_once(current)
                    return
                except StoreLost as lost:
                    cause = lost.cause
                except StoreUnavailableError as exc:
                    cause = exc
                # The store failed under the workflow: nothing is charged to the task.
                # Wait it out, then continue from what the store recorded, if the
                # claim still holds (a write whose outcome was unknown is settled by
                # that re-read: replay skips what was recorded, and the rest runs again).
                # A peeked task's claim is settled by that read too (until then no claim
                # here takes it: that would give it the very epoch this run expects).
                current = await held_again(self.store, self.tasks_outage, self.owner, task, cause)
                self.parts.claiming.pop(task.id, None)
                if current is not None:
                    self.redriven += 1
                    log.info(
                        "task %s: continuing after a store fault", task.id, extra=_fields(task)
                    )
        except (Abandoned, StaleEpochError):
            log.debug("task %s: claim lost, stopping silently", task.id, extra=_fields(task))
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug of ours must not kill the scheduler
            log.exception("task %s: scheduler failure", task.id, extra=_fields(task))
        finally:
            if self._running.get(task.id) is asyncio.current_task():
                del self._running[task.id]
                pending = self.parts.pending
                if task.id in pending:
                    del pending[task.id]
                replied.drop(self.parts, task.id)
                self.parts.claiming.pop(task.id, None)  # never claimed: another holder has it
            self.finished += 1
            self._slot_freed.set()

    async def _drive_once(self, task: Task) -> None:
        # Replies handed to an earlier run of the task are that run's: its end settled them.
        pending = self.parts.pending
        if task.id in pending:
            del pending[task.id]
        replied.drop(self.parts, task.id)
        ctx = WorkflowContext(self.parts, task)
        if tracing.ENABLED and tracing.active():
            with tracing.task_span(task) as ctx.traced:
                await self._run_task(ctx, task)
        else:
            await self._run_task(ctx, task)

    async def _run_task(self, ctx: WorkflowContext, task: Task) -> None:
        if task.process_state is ProcessState.COMPENSATING:
            await ending.compensate(self.parts, ctx, task.error)
        else:
            await self._run_workflow(ctx)

    async def _run_workflow(self, ctx: WorkflowContext) -> None:
        task = ctx.task
        spec = self.workflows.get(task.workflow)
        if spec is None:
            await ending.error(self.parts, ctx, {"reason": f"unknown workflow {task.workflow!r}"})
            return
        try:
            result = await _settled(ctx, spec.fn(ctx, task.input))
        except Exception as exc:
            await ending.failed(self.parts, ctx, exc)
        else:
            await ending.finish(self.parts, ctx, result)


async def _settled(ctx: WorkflowContext, body: Awaitable[JsonValue]) -> JsonValue:
    """Run the workflow's body; whatever its end, no call of it is left in flight.

    A body that returns or raises waits for its parallel calls still running, so
    that every step has its outcome before the task ends or its compensation is
    planned; one that lost its claim (or is cancelled) cancels them.
    """
    try:
        result = await body
    except Exception:
        await ctx.settle()
        raise
    except BaseException:
        await ctx.settle(cancel=True)
        raise
    await ctx.settle()
    return result


def _fields(task: Task) -> dict[str, object]:
    """The `extra=` of a line about a claimed task as a whole."""
    return task_fields(task.id, task.workflow, epoch=task.lock_epoch)
