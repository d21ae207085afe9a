"""How an agent worker's handling of a request ends: its reply, or the reason it sent none.

`shepherd.core.handling` decides the end; this carries it out. A reply is
written and its request acknowledged in one transaction, which also gives back
the handling's capacity slot; through a store outage it is tried again until
`complete_by`. When the scheduler of this process waits for the reply and
riding would save a commit (the store's writer has little to do:
`shepherd.core.riding`), it is handed over before it is written
(`Recorder.offer`): the workflow's next write takes it into its own
transaction, or, if none comes within `HOLD_TURNS` turns of the event loop, it
is written alone as any other; with the writer busy, its next batch carries
the reply anyway, written alone at once. A handling that replies nothing (given up, timed out) leaves its
reason in the task's history, for the operator and the alert: the supervisor
sees `complete_by` pass either way.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Protocol, final

from shepherd import tracing
from shepherd.agents.pending import HandedBack, PendingReply
from shepherd.core.events import EventKind
from shepherd.core.handling import GiveUp, Phase, ReplyError, TimedOut
from shepherd.core.records import Reply
from shepherd.core.riding import RIDE_BELOW, rides
from shepherd.errors import CommitUnknownError, StoreUnavailableError
from shepherd.failures import bug_body, error_body
from shepherd.outage import Outage
from shepherd.payloads import dumps_error, load_stored
from shepherd.store.ops import ReplyAndAck
from shepherd.tasklog import request_fields

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent
    from shepherd.agents.breakers import BreakerGate
    from shepherd.agents.threads import ThreadedCalls
    from shepherd.clock import Clock
    from shepherd.core.handling import Superseded
    from shepherd.core.records import JsonValue, Request
    from shepherd.core.resources import Slot
    from shepherd.governance.capacity import CapacityGate
    from shepherd.metrics import AgentCounters
    from shepherd.store.roles import AgentStore

__all__ = ["HOLD_TURNS", "Ends", "Recorder", "pending_reply"]

log = logging.getLogger("shepherd.agent")


class Recorder(Protocol):
    """The scheduler of an agent worker's own process, as the worker hands it replies."""

    @property
    def owner(self) -> str:
        """Its name as the holder of the tasks it claims."""
        ...

    def deliver(self, reply: Reply) -> None:
        """Hand over a reply recorded on its step."""
        ...

    def recheck(self, task_id: str, seq: int) -> None:
        """Have the step waiting for `(task_id, seq)` read its outcome from the store."""
        ...

    def offer(self, pending: PendingReply) -> bool:
        """Hand a reply not yet committed to its waiting step; False if none waits for it.

        Taken, its step's workflow commits it with its next write (`reply_then`).
        """
        ...


@final
class Ends:
    """Carries out the ends of one agent worker's handlings.

    Args:
        store: The store, as an agent worker uses it.
        worker: The worker's name in the requests it takes.
        recorder: The scheduler of this process, if one runs here (see `AgentWorker`).
        capacity: The worker's capacity slots (a reply gives one back).
        breakers: The worker's gate on the circuit breakers (told how a try went).
        threaded: The worker's handler threads (one still running at complete_by says so).
        clock: What the waits through a store outage run on.
    """

    def __init__(
        self,
        store: AgentStore,
        *,
        worker: str,
        recorder: Recorder | None,
        capacity: CapacityGate,
        breakers: BreakerGate,
        threaded: ThreadedCalls,
        clock: Clock,
    ) -> None:
        self.store = store
        self.worker = worker
        self.recorder = recorder
        self.capacity = capacity
        self.breakers = breakers
        self.threaded = threaded
        self.replied = 0
        self.timeouts = 0
        #: Replies offered to ride their workflow's next write, not yet committed.
        self.riding = 0
        self.outage = Outage("agent replies", log=log, clock=clock, watch=store.watch)

    async def end(
        self,
        end: ReplyError | GiveUp | TimedOut | Superseded,
        request: Request,
        spec: Agent,
        *,
        slot: Slot | None,
        counters: AgentCounters,
    ) -> None:
        """Carry out `end`, the end of a handling of `request` by `spec` that held `slot`.

        (A result is replied by the worker's shell, which holds it: `reply`.)
        """
        if isinstance(end, ReplyError):
            if end.answered:
                # The service answered (a permanent refusal too): not a breaker failure.
                await self.breakers.after_call(spec, request, failed=False)
            body = bug_body(end.error, tries=end.tries) if end.bug else error_body(end.error)
            await self.reply(request, ok=False, body=body, slot=slot)
        elif isinstance(end, GiveUp):
            log.warning(
                "%s %s/%s: giving up after %d tries: %s",
                request.agent,
                request.task_id,
                request.seq,
                end.tries,
                end.error,
                extra=request_fields(request),
            )
            await self.note(
                request, EventKind.STEP_GAVE_UP, tries=end.tries, error=error_body(end.error)
            )
        elif isinstance(end, TimedOut):
            self.timeouts += 1
            counters.timeouts.inc()
            await self._timed_out(end, request, spec)
        else:
            log.info(
                "%s %s/%s: superseded",
                request.agent,
                request.task_id,
                request.seq,
                extra=request_fields(request),
            )

    async def _timed_out(self, end: TimedOut, request: Request, spec: Agent) -> None:
        """complete_by passed: reply nothing (someone else may already be retrying)."""
        if end.held_back is not None:
            if end.cause is Phase.BREAKER:
                log.info(
                    "%s %s/%s: breaker of %r still open at complete_by",
                    request.agent,
                    request.task_id,
                    request.seq,
                    spec.service_name,
                    extra=request_fields(request),
                )
            else:
                log.info(
                    "%s %s/%s: %s",
                    request.agent,
                    request.task_id,
                    request.seq,
                    end.held_back["message"],
                    extra=request_fields(request),
                )
            await self.note(
                request, EventKind.STEP_TIMED_OUT, tries=end.tries, error=dict(end.held_back)
            )
            return
        if not self.threaded.overdue(request):  # else it said so, naming the thread
            log.info(
                "%s %s/%s: cancelled at complete_by",
                request.agent,
                request.task_id,
                request.seq,
                extra=request_fields(request),
            )
        if end.hung:
            await self.breakers.after_call(spec, request, failed=True)
        error: JsonValue = None
        if end.failure is not None:
            error = bug_body(end.failure, tries=end.tries) if end.bug else error_body(end.failure)
        await self.note(request, EventKind.STEP_TIMED_OUT, tries=end.tries, error=error)

    async def note(
        self, request: Request, kind: EventKind, *, tries: int, error: JsonValue
    ) -> None:
        """Leave the reason in the task's history, for the operator and the alert."""
        if tracing.ENABLED:
            tracing.failed(str(kind))
        detail = {
            "seq": request.seq,
            "agent": request.agent,
            "attempt": request.attempt,
            "tries": tries,
        }
        if error is not None:
            detail["error"] = error
        try:
            await self.store.note(request.task_id, kind, detail)
        except Exception:  # the history is a courtesy; the supervisor recovers anyway
            log.exception(
                "could not record %s for %s/%s",
                kind,
                request.task_id,
                request.seq,
                extra=request_fields(request),
            )

    async def reply(
        self, request: Request, *, ok: bool, body: JsonValue, slot: Slot | None = None
    ) -> bool:
        """Reply, acknowledge and give back `slot`; through a store outage, try again
        until complete_by.

        A retry after an unknown commit is safe: if the first one committed, the
        request is gone and the retry replies nothing.
        """
        recorder = self.recorder
        trace = None
        if tracing.ENABLED and tracing.active():
            trace = tracing.current()
            if not ok:
                tracing.failed(_told(body))
        owner = None if recorder is None else recorder.owner
        # `rides` asked only when the replies riding leave room (no call on the busy path).
        if (
            recorder is not None
            and self.riding < RIDE_BELOW
            and rides(self.store.backlog(), self.riding)
        ):
            return await self._offer(
                recorder,
                ReplyAndAck(
                    request,
                    worker=self.worker,
                    ok=ok,
                    body=body,
                    slot=slot,
                    recorder=owner,
                    trace=trace,
                ),
            )
        try:
            replied = await self.store.reply_and_ack(
                request,
                worker=self.worker,
                ok=ok,
                body=body,
                slot=slot,
                recorder=owner,
                trace=trace,
            )
        except StoreUnavailableError as exc:
            op = ReplyAndAck(
                request,
                worker=self.worker,
                ok=ok,
                body=body,
                slot=slot,
                recorder=owner,
                trace=trace,
            )
            return await self._alone(op, exc)
        # `_replied`, inlined: the path of every reply while the writer is busy.
        self.outage.over()
        if slot is not None:
            self.capacity.forget(slot)
        if isinstance(replied, Reply):
            if recorder is not None:
                recorder.deliver(replied)
            elif tracing.ENABLED and replied.trace is not None and tracing.active():
                tracing.replied(replied)
            replied = True
        if replied:
            self.replied += 1
        return replied

    async def _offer(self, recorder: Recorder, op: ReplyAndAck) -> bool:
        """Offer `op` to its waiting step to ride its workflow's next write; if none waits,
        none takes it in time or that write was not made, commit it alone."""
        failure: StoreUnavailableError | None = None
        pending = pending_reply(op)
        if pending is not None and recorder.offer(pending):
            asyncio.get_running_loop().call_soon(self._hold, pending, HOLD_TURNS)
            self.riding += 1
            try:
                return self._replied(await pending.done, op.slot, deliver=False)
            except HandedBack:
                pass  # the write that took it was not made: alone, as any reply
            except StoreUnavailableError as exc:
                # Recorded nowhere, or unknown: the workflow that went on with it
                # was stopped (`reply_then`), and the reply is tried alone as
                # before, delivered to whichever step then waits for it.
                failure = exc
            finally:
                self.riding -= 1
        return await self._alone(op, failure)

    def _hold(self, pending: PendingReply, turns: int) -> None:
        """Leave `pending` to its workflow's next write for `turns` turns of the event
        loop; then withdraw it and commit it alone (`done` tells how that went).

        A workflow that goes on at once takes it in the turn its step wakes (this
        runs after that step in the same turn), so a slow workflow body never
        holds a reply back.
        """
        if not pending.offered:
            return
        if turns > 1:
            asyncio.get_running_loop().call_soon(self._hold, pending, turns - 1)
            return
        pending.withdraw()
        op = pending.op
        commit = asyncio.ensure_future(
            self.store.reply_and_ack(
                op.request,
                worker=op.worker,
                ok=op.ok,
                body=op.body,
                slot=op.slot,
                recorder=op.recorder,
                trace=op.trace,
            )
        )
        commit.add_done_callback(pending.settle_from)

    async def _alone(self, op: ReplyAndAck, failure: StoreUnavailableError | None) -> bool:
        """Reply and acknowledge `op` alone; through a store outage, try again until complete_by.

        A retry after an unknown commit is safe: if the first one committed, the
        request is gone and the retry replies nothing. `failure`: the first try's
        error, when it was made already.
        """
        recorder, request = self.recorder, op.request
        while True:
            try:
                if failure is not None:
                    raise failure
                replied = await self.store.reply_and_ack(
                    request,
                    worker=op.worker,
                    ok=op.ok,
                    body=op.body,
                    slot=op.slot,
                    recorder=op.recorder,
                    trace=op.trace,
                )
            except StoreUnavailableError as exc:
                failure = None
                if recorder is not None and isinstance(exc, CommitUnknownError):
                    # It may have been recorded for the scheduler here, which would
                    # then never hear of it: that step looks at the store again.
                    recorder.recheck(request.task_id, request.seq)
                if self.store.now() >= request.complete_by:
                    # Too late to count: the supervisor sees complete_by pass.
                    log.warning(
                        "%s %s/%s: reply lost to a store outage at complete_by",
                        request.agent,
                        request.task_id,
                        request.seq,
                        extra=request_fields(request),
                    )
                    return False
                await self.outage.pause(exc)
                continue
            return self._replied(replied, op.slot, deliver=True)

    def _replied(self, replied: bool | Reply, slot: Slot | None, *, deliver: bool) -> bool:
        """A reply committed: give its slot back, hand it over (unless it was already)."""
        self.outage.over()
        if slot is not None:
            self.capacity.forget(slot)
        if isinstance(replied, Reply):
            if deliver and self.recorder is not None:
                self.recorder.deliver(replied)
            elif tracing.ENABLED and replied.trace is not None and tracing.active():
                tracing.replied(replied)
            replied = True
        if replied:
            self.replied += 1
        return replied


#: Turns of the event loop a reply handed over before its commit waits for its
#: workflow's next write to take it (see `Ends._pended`). A workflow that goes
#: straight on makes that write in the turn its step wakes; one whose step was the
#: last of `asyncio.gather` in the third (the call's task ends, the gather's
#: callback runs, then the workflow's task). Idle, three turns take microseconds;
#: busy, the writer's batch in flight takes longer than they do.
HOLD_TURNS = 3


def pending_reply(op: ReplyAndAck) -> PendingReply | None:
    """`op` to hand over before its commit, with its body as a replay reads it (the JSON
    text read back); None if its body is not JSON.

    A result is read back through the standard JSON codec only (the store's own
    checks, run again on the hot path, cost more than the rest of the
    hand-over): a result the store refuses after all (a NUL character, keys
    that JSON writes alike, a size over the store's limit) is recorded as a
    failure, which does not count as the result handed over, and the workflow
    that went on with it is stopped (`reply_then`). An error is encoded as the
    store encodes it (cut to size).
    """
    body = op.body
    if not op.ok:
        return PendingReply(op, load_stored(dumps_error(body)))
    if body is None or isinstance(body, (str, int, float)):
        return PendingReply(op, body)
    try:
        return PendingReply(op, json.loads(json.dumps(body, separators=(",", ":"))))
    except (TypeError, ValueError, RecursionError):
        return None


def _told(body: JsonValue) -> str:
    """An error reply's reason for its step span: its type and message."""
    if isinstance(body, dict):
        return f"{body.get('type')}: {body.get('message')}"
    return str(body)
