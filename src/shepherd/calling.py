"""The caller's side of durable calls (`app.call`): resolve, send, then wait for the one answer.

A call that names an entity is resolved here, as a step is when it is first
sent, and its resolution is sent with it (`call_resolution`).

Every call of a process waits on one future; one reader per process reads the
answers of all its waiting calls in one store read whenever `signals.ANSWERS`
rings (a commit here, or a wake-up from another process), and at the fallback
poll otherwise, so that many concurrent callers cost one read per wake-up, not
one each.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, final

from shepherd.clock import Deadline
from shepherd.core.resources import resource_conflict
from shepherd.errors import CallFailedError, ResourceConflictError, StoreUnavailableError
from shepherd.idle import IdleBackoff
from shepherd.outage import Outage
from shepherd.store import signals as ch
from shepherd.store.ids import new_task_id

if TYPE_CHECKING:
    from shepherd.agents.agent import Agent
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.records import CallAnswer, JsonValue
    from shepherd.core.resources import Resolution
    from shepherd.governance.resolver import Resolver
    from shepherd.registration_checks import CallPlan
    from shepherd.store.roles import CallStore

__all__ = ["Caller", "call_resolution"]

log = logging.getLogger("shepherd.calls")


async def call_resolution(
    resolver: Resolver, agent: Agent, entity: str | None
) -> Resolution | None:
    """Where `entity` lives, for a call to `agent` (`app.call(..., entity=)`), as `ctx.call`
    resolves a step's: kept with the call, so every handling uses its resource. None
    without an entity.

    Raises:
        ResourceConflictError: The agent is bound to another resource (`resource=`).
        UnresolvedEntityError: The entity is assigned to no partition (and there is
            no default one), or the resolver cannot place it.
        InvalidResourceError: `entity` cannot be an entity's name.
        StoreUnavailableError: The store cannot be reached (nothing cached).
    """
    if entity is None:
        return None
    resolution = await resolver.resolve(entity)
    problem = resource_conflict(agent.resource, resolution)
    if problem is not None:
        raise ResourceConflictError(agent.name, problem)
    return resolution


#: Seconds a call's row outlives its caller's deadline before it may be deleted.
KEEP_AFTER = 60.0


@final
class Caller:
    """Sends durable calls and hands each caller its answer.

    Args:
        store: The store, as a caller uses it.
        settings: The fallback poll.
        clock: What the caller's timeout and the polls run on.
    """

    def __init__(self, store: CallStore, *, settings: Settings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self._waiting: dict[str, asyncio.Future[CallAnswer]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._outage = Outage("call answers", log=log, clock=clock, watch=store.watch)

    async def call(
        self,
        agent: str,
        payload: JsonValue,
        plan: CallPlan,
        *,
        resolution: Resolution | None = None,
    ) -> JsonValue:
        """Send a call to `agent`, as `plan` says, and return its result once the answer
        is committed. `resolution`, where the call's entity lives, is kept with the call.

        Raises:
            CallFailedError: The answer is an error.
            TimeoutError: No answer within the plan's wait (the call may still run).
            PayloadError: `payload` is not JSON or is too large (nothing was sent).
        """
        call_id = new_task_id()
        answer: asyncio.Future[CallAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            async with Deadline(self.clock, plan.wait):
                await self.store.send_call(
                    call_id,
                    agent,
                    payload,
                    within=plan.within,
                    max_attempts=plan.attempts,
                    expires_in=plan.wait + KEEP_AFTER,
                    owner_key=plan.owner_key,
                    resolution=resolution,
                )
                self._read_soon()
                got = await asyncio.shield(answer)
        finally:
            self._waiting.pop(call_id, None)
        if got.ok:
            return got.body
        raise CallFailedError(agent, call_id, got.body)

    def close(self) -> None:
        """Stop the reader (waiting callers then time out)."""
        if self._reader is not None:
            self._reader.cancel()

    def _read_soon(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(
                self._read(), name="shepherd-call-answers"
            )

    async def _read(self) -> None:
        """Read the answers of every waiting call, at each wake-up, while any waits."""
        backoff = IdleBackoff(self.settings.poll_interval, self.settings.idle_poll_cap)
        await self.store.listen((ch.ANSWERS,))
        while self._waiting:
            wake = self.store.signals.event(ch.ANSWERS)
            try:
                answers = await self.store.get_answers(list(self._waiting))
            except StoreUnavailableError as exc:  # wait it out; callers time out meanwhile
                await self._outage.pause(exc)
                continue
            self._outage.over(wrote=False)  # a read
            for call_id, answer in answers.items():
                future = self._waiting.pop(call_id, None)
                if future is not None and not future.done():
                    future.set_result(answer)
            if self._waiting:
                await self.clock.wait_event(wake, backoff.next(found=bool(answers)))
