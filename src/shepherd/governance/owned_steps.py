"""Steps through an exclusive agent: its key's owner handles them under the step's rules.

A step that calls an exclusive agent (`ctx.call`) queues its request with its
owning key; the key's owner (`OwnerServer`) takes the key's requests in the
order they were queued, one at a time, or a batch at a time when the agent
batches (the handler then gets the list and returns one result per request).
What differs from a call (`app.call`) is whose rules govern: the step's. A
handling is retried by the step's retry policy (the one it carries, else the
agent's) until the step's `complete_by` (a batch's: the earliest of them);
a step whose handling ends without a reply (out of tries, or its window
passed) is left for the supervisor, as any step is. A call's `attempts` and
`CallGaveUp` do not apply. A handling passes the gates of its process
(`shepherd.agents.gates`) as a plain step's does: a slot of the agent's
resource (or of the step's resolved entity's), the breaker (an open one is
waited for) and a rate token before each try; a batch is one handling.

The replies are written as every step's reply is (`ReplyAndAck`: fenced by
the request's lease, the task's epoch and the step's attempt, and recorded at
once for the scheduler of this process), inside one transaction with the
owner state and the owner's fence (`ReplyOwned`): a stale owner's replies
never land. A lone step's reply whose step waits in this process's scheduler
is handed to it first, as an agent worker's is (`agents.pending`): it rides,
with the owner's fence and state, in its workflow's next write
(`reply_then`), and is written alone only if no write takes it. A step of a
non-batching agent started by that scheduler is handed to the key's loop as
it is queued, behind the owner's fence (`governance.handing`): with the
riding reply, a step through an owner costs the transactions of a plain one.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, cast, final

from shepherd.agents.ends import HOLD_TURNS, pending_reply
from shepherd.agents.helpers import WorkerHelpers
from shepherd.agents.pending import HandedBack
from shepherd.agents.request import AgentRequest
from shepherd.core.batching import BATCH_ERROR
from shepherd.core.events import EventKind
from shepherd.core.handling import (
    GiveUp,
    Phase,
    ReplyError,
    ReplyResult,
    Retry,
    TimedOut,
    begin,
)
from shepherd.core.ownership import NO_STATE, NoState
from shepherd.core.records import Reply
from shepherd.errors import CommitUnknownError, StepSupersededError, StoreUnavailableError
from shepherd.failures import bug_body, classify, error_body
from shepherd.store.ops import AnswerOwned, ReplyAndAck

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent, BlockingHandler, Handler
    from shepherd.agents.ends import Recorder
    from shepherd.agents.gates import Gates
    from shepherd.agents.pending import PendingReply
    from shepherd.clock import Clock
    from shepherd.core.handling import Next
    from shepherd.core.records import JsonValue, Request
    from shepherd.outage import Outage
    from shepherd.store.roles import OwnerStore

__all__ = ["MAX_UNANSWERED", "OwnedSteps", "unanswered_with"]

log = logging.getLogger("shepherd.agents.owners")

#: How one handling of a key's steps ended: each step's reply (ok, body), or None
#: for no reply (given up, timed out or superseded: the supervisor sees the
#: step's complete_by pass).
Outcome = list[tuple[bool, "JsonValue"]] | None


class _BrokenBatchError(Exception):
    """A batch handler's result is not one result per request: every step fails as a bug."""


@final
class OwnedSteps:
    """Handles the steps of the keys one process owns, and writes their replies.

    Args:
        store: The store, as an owner uses it.
        owner: The process's name as the holder of key leases (`owner_of`).
        worker: The name the owner's takes lease the requests to (the agent
            worker name of its process, so that a crash is attributed as for
            any request it held).
        clock: What deadlines and retry waits run on.
        outage: The owner's outage tracker (a reply waits a store outage out).
        gates: The governance of its process's agent worker (slots, breakers,
            rates), shared with the steps and calls handled there.
    """

    def __init__(
        self,
        store: OwnerStore,
        *,
        owner: str,
        worker: str,
        clock: Clock,
        outage: Outage,
        gates: Gates,
    ) -> None:
        self.store = store
        self.gates = gates
        self.owner = owner
        self.worker = worker
        self.clock = clock
        self.outage = outage
        self.rng = random.Random()
        #: The scheduler of this process, if one runs here: a reply to a task it
        #: holds is recorded in the reply's own transaction and handed to it.
        self.recorder: Recorder | None = None
        self.replied = 0
        #: `request.heartbeat()` and `request.once()`, as an agent worker lends them
        #: (the owner's takes lease the requests to `worker`).
        self.helpers = WorkerHelpers(store, worker=worker)

    async def serve(
        self, spec: Agent, key: str, epoch: int, state: JsonValue, requests: list[Request]
    ) -> tuple[bool, JsonValue, bool]:
        """Handle `requests` of `key` (one, or a batch) and reply.

        Returns whether the key is still owned, its owner state now, and
        whether the handling ended without a reply (the owner does not take
        these requests again: the supervisor sees their complete_by pass).
        """
        shared = copy.deepcopy(state)
        calls = [
            AgentRequest.of_step(
                r, self.helpers, owner_key=key, owner_epoch=epoch, owner_state=shared
            )
            for r in requests
        ]
        outcome = await self._handle(spec, requests, calls)
        if outcome is None:
            return True, state, True
        new_state = next(
            (c.owner_state for c in reversed(calls) if c.owner_state is not shared), shared
        )
        replies = [
            ReplyAndAck(
                request,
                worker=self.worker,
                ok=ok,
                body=body,
                recorder=None if self.recorder is None else self.recorder.owner,
            )
            for request, (ok, body) in zip(requests, outcome, strict=True)
        ]
        kept = new_state if new_state != state else NO_STATE
        if len(replies) == 1 and self.recorder is not None:
            owned = await self._offer(spec, key, epoch, replies[0], kept)
        else:
            owned = await self._reply(spec, key, epoch, replies, kept)
        if owned is None:
            return True, state, True
        if not owned:
            log.warning(
                "%s: key %r moved to another owner; its replies were refused", spec.name, key
            )
            return False, state, True
        return True, new_state, False

    async def _offer(
        self, spec: Agent, key: str, epoch: int, op: ReplyAndAck, state: JsonValue | NoState
    ) -> bool | None:
        """Hand the reply to its step waiting in this process, before it is written: its
        workflow's next write takes it, with the owner's fence and state (`reply_then`).

        As an agent worker's reply (`Ends.reply`): not taken within HOLD_TURNS
        turns of the event loop, it is withdrawn and written alone; taken but
        not written, or not counted, it is written alone (a reply lands once:
        its request is gone once written), which also tells whether the key is
        still owned. Returns as `_reply` does.
        """
        recorder = self.recorder
        pending = pending_reply(op)
        if recorder is None or pending is None:
            return await self._reply(spec, key, epoch, [op], state)
        pending.owned = AnswerOwned(
            spec.name,
            key,
            owner=self.owner,
            epoch=epoch,
            answers=[],
            set_state=not isinstance(state, NoState),
            state=None if isinstance(state, NoState) else state,
        )
        if not recorder.offer(pending):
            return await self._reply(spec, key, epoch, [op], state)
        try:
            for _ in range(HOLD_TURNS):  # the turns its workflow's next write has to take it
                await asyncio.sleep(0)
        except asyncio.CancelledError:  # the key's loop stops: its workflow replays from the store
            if pending.withdraw():
                pending.settle(HandedBack())
            raise
        if pending.withdraw():
            return await self._reply(spec, key, epoch, [op], state, withdrawn=pending)
        try:
            outcome = await pending.done
        except (HandedBack, StoreUnavailableError):
            return await self._reply(spec, key, epoch, [op], state)
        if not isinstance(outcome, Reply):  # not counted: was the key still owned?
            return await self._reply(spec, key, epoch, [op], state)
        self.outage.over()
        self.replied += 1
        return True

    async def _reply(
        self,
        spec: Agent,
        key: str,
        epoch: int,
        replies: list[ReplyAndAck],
        state: JsonValue | NoState,
        *,
        withdrawn: PendingReply | None = None,
    ) -> bool | None:
        """Write the replies with the owner state; whether the key was still owned (None:
        the store stayed unreachable until the earliest complete_by).

        `withdrawn`: the one reply was handed to its step already (`_offer`): its
        outcome settles the hand-over, and it is not handed over again.
        """
        deadline = min(r.request.complete_by for r in replies)
        outcomes: list[bool | Reply] = []
        owned: bool | None = None
        try:
            while True:
                try:
                    owned, outcomes = await self.store.reply_owned(
                        spec.name,
                        key,
                        owner=self.owner,
                        epoch=epoch,
                        replies=replies,
                        state=state,
                    )
                except StoreUnavailableError as exc:
                    recorder = self.recorder
                    if recorder is not None and isinstance(exc, CommitUnknownError):
                        for r in replies:  # recorded for the scheduler here, perhaps: look again
                            recorder.recheck(r.request.task_id, r.request.seq)
                    if self.store.now() >= deadline:
                        log.warning("%s: replies of key %r lost to a store outage", spec.name, key)
                        return None
                    await self.outage.pause(exc)
                    continue
                self.outage.over()
                break
        finally:
            if withdrawn is not None:  # its step's workflow learns how its commit went
                if owned is None:
                    withdrawn.settle(StoreUnavailableError("a reply's owner could not commit it"))
                else:  # not owned: not written, so it did not count
                    withdrawn.settle(outcomes[0] if outcomes else False)
        for outcome in outcomes:
            if isinstance(outcome, Reply) and self.recorder is not None and withdrawn is None:
                self.recorder.deliver(outcome)
            if outcome:
                self.replied += 1
        return owned

    async def _handle(
        self, spec: Agent, requests: list[Request], calls: list[AgentRequest]
    ) -> Outcome:
        """One handling of `requests` under the steps' rules: their replies, or None.

        It passes the gates a plain step's handling passes, in the same order
        (`core.handling`): a slot of the agent's resource (its `resource=`,
        else the first step's resolved entity's), then before each try the
        service's breaker (an open one is waited for, as a step waits) and a
        rate token. A batch is one handling: one slot, one token per try. The
        slot is given back as the handling ends, before the replies are written.
        """
        now = self.store.now()
        deadline = min(r.complete_by for r in requests)
        first = requests[0]
        resource = spec.resource_of(first)
        handling = begin(
            complete_by=deadline,
            now=now,
            retry=first.retry,
            policy=spec.retry,
            resource=resource,
            service=None if spec.breaker is None else spec.service_name,
        )
        if handling is None:
            return None
        if isinstance(handling, ReplyError):
            return [(False, error_body(handling.error))] * len(requests)
        run = _runner(spec, calls)
        label = f"{spec.name} {first.task_id}/{first.seq}" + (
            f" (and {len(requests) - 1} more)" if len(requests) > 1 else ""
        )
        gates = self.gates
        holder = f"{self.worker}:owned:{first.id}:{first.attempt}"
        results: list[JsonValue] = []
        decision: Next = handling.start()
        try:
            async with self.clock.deadline(deadline, now=now) as scope:
                if len(requests) == 1:  # a heartbeat moves the handling's deadline too
                    self.helpers.scopes[first.id] = scope
                while True:
                    if decision is Phase.TRY:
                        try:
                            results = await run()
                        except _BrokenBatchError as broken:
                            log.error("%s", broken)
                            body: JsonValue = {
                                "type": BATCH_ERROR,
                                "message": str(broken),
                                "bug": True,
                            }
                            return [(False, body)] * len(requests)
                        except StepSupersededError:
                            return None
                        except Exception as exc:
                            decision = handling.failed(
                                exc,
                                classify(exc),
                                retry_after=_retry_after(exc),
                                now=self.store.now(),
                                complete_by=deadline,
                                rng=self.rng,
                            )
                            continue
                        decision = handling.succeeded()
                        break
                    if isinstance(decision, Phase):  # a gate: a slot, the breaker, a token
                        decision = await gates.next(
                            decision,
                            handling,
                            spec,
                            resource=resource,
                            holder=holder,
                            fail_fast=False,  # a step waits while its breaker is open
                            now=self.store.now,
                            complete_by=deadline,
                            rng=self.rng,
                        )
                        continue
                    if isinstance(decision, Retry):
                        for call in calls:
                            call.retry = handling.retries
                        await self.clock.sleep(decision.delay)
                        decision = handling.slept()
                        continue
                    break
        except TimeoutError:
            if not scope.expired():
                raise
            decision = handling.expired()
        finally:
            self.helpers.scopes.pop(first.id, None)
            slot = gates.capacity.held(holder)
            if slot is not None:
                await gates.capacity.release(slot)
        return await self._outcome(spec, requests, decision, results, label)

    async def _outcome(
        self, spec: Agent, requests: list[Request], end: Next, results: list[JsonValue], label: str
    ) -> Outcome:
        """The replies of a handling that ended in `end` (None: none), told to the breaker."""
        breakers = self.gates.breakers
        if isinstance(end, ReplyResult):
            if end.answered:
                await breakers.after_call(spec, failed=False)
            return [(True, result) for result in results]
        if isinstance(end, ReplyError):
            if end.answered:  # the service answered (a refusal too): not a breaker failure
                await breakers.after_call(spec, failed=False)
            if end.bug:
                log.error("%s: unexpected %s; the step fails as a bug", label, end.error)
                return [(False, bug_body(end.error, tries=end.tries))] * len(requests)
            return [(False, error_body(end.error))] * len(requests)
        if isinstance(end, TimedOut) and end.hung:
            await breakers.after_call(spec, failed=True)
        if isinstance(end, GiveUp | TimedOut):
            await self._note(requests, end)
        return None

    async def _note(self, requests: list[Request], end: GiveUp | TimedOut) -> None:
        """Leave why no reply was sent in each task's history (the supervisor recovers anyway)."""
        error: BaseException | None
        held_back: JsonValue = None
        if isinstance(end, GiveUp):
            kind, error = EventKind.STEP_GAVE_UP, end.error
        else:  # held back by the slot, the breaker or the rate: noted as the worker notes it
            kind, error = EventKind.STEP_TIMED_OUT, end.failure
            held_back = None if end.held_back is None else dict(end.held_back)
        log.warning(
            "%s %s/%s: no reply (%s after %d tries)",
            requests[0].agent,
            requests[0].task_id,
            requests[0].seq,
            kind,
            end.tries,
        )
        for request in requests:
            detail: dict[str, JsonValue] = {
                "seq": request.seq,
                "agent": request.agent,
                "attempt": request.attempt,
                "tries": end.tries,
            }
            if held_back is not None:
                detail["error"] = held_back
            elif error is not None:
                detail["error"] = error_body(error)
            try:
                await self.store.note(request.task_id, kind, detail)
            except Exception:  # the history is a courtesy
                log.exception("could not record %s for %s/%s", kind, request.task_id, request.seq)


def _runner(spec: Agent, calls: list[AgentRequest]) -> Callable[[], Awaitable[list[JsonValue]]]:
    """One try of the handler: one request, or (a batching agent) the list of them."""
    if spec.batch is None:
        call = calls[0]

        async def one() -> list[JsonValue]:
            if spec.threads:
                fn = cast("BlockingHandler", spec.fn)
                return [await asyncio.to_thread(fn, call)]
            return [await cast("Handler", spec.fn)(call)]

        return one

    async def many() -> list[JsonValue]:
        if spec.threads:
            blocking = cast("Callable[[list[AgentRequest]], JsonValue]", spec.fn)
            results = await asyncio.to_thread(blocking, calls)
        else:
            handler = cast("Callable[[list[AgentRequest]], Awaitable[JsonValue]]", spec.fn)
            results = await handler(calls)
        if not isinstance(results, list) or len(results) != len(calls):
            got = (
                f"a list of {len(results)}" if isinstance(results, list) else type(results).__name__
            )
            raise _BrokenBatchError(
                f"{spec.name}: the batch handler returned {got} for {len(calls)} requests; "
                "it must return one result per request, in order"
            )
        return results

    return many


def _retry_after(exc: BaseException) -> float | None:
    """The delay the service asked for (`TransientError(retry_after=...)`), if any."""
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) else None


#: The most step requests a key's loop remembers it handled without a reply.
MAX_UNANSWERED = 1000

#: A step request a key's loop handled without a reply: (id, task id, seq, attempt).
Unanswered = tuple[int, str, int, int]


def unanswered_with(unanswered: set[Unanswered], steps: Sequence[Request]) -> set[Unanswered]:
    """`unanswered` with `steps` added, keeping the newest MAX_UNANSWERED (the oldest
    have expired by now): the owner's loop does not take them again."""
    unanswered.update((r.id, r.task_id, r.seq, r.attempt) for r in steps)
    if len(unanswered) > MAX_UNANSWERED:
        return set(sorted(unanswered)[-MAX_UNANSWERED:])
    return unanswered
