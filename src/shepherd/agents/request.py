"""What a handler receives: the request, its deadline, and its step's helpers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.core.records import JsonValue, idempotency_key
from shepherd.payloads import check_text

if TYPE_CHECKING:
    from shepherd.core.records import Request
    from shepherd.core.resources import Resolution

__all__ = ["AgentRequest", "StepHelpers"]


class StepHelpers:
    """What the agent worker lends a request for `heartbeat` and `once`.

    The worker's own implementation talks to the store and moves the handler's
    deadline; tests of handlers may pass their own.
    """

    async def heartbeat(self, request: AgentRequest) -> datetime:
        """Move the step's complete_by one window ahead; return the new instant."""
        raise NotImplementedError("heartbeat() needs an agent worker")

    async def once(
        self,
        request: AgentRequest,
        key: str,
        effect: Callable[[], Awaitable[JsonValue]],
    ) -> JsonValue:
        """Run `effect` at most once per `key`; return its (recorded) result."""
        raise NotImplementedError("once() needs an agent worker")


@final
@dataclass(slots=True, kw_only=True)
class AgentRequest:
    """What a handler receives."""

    payload: JsonValue
    #: `task_id/seq`: the same for every execution of one step; pass it to the service.
    idempotency_key: str
    #: How many times this step has been sent to an agent (1 on the first send).
    attempt: int
    #: Retries of this attempt inside the agent so far (0 on the first try).
    retry: int
    #: When the step is deemed failed; `heartbeat()` moves it.
    complete_by: datetime
    task_id: str
    seq: int
    agent: str
    #: The step's window in seconds (how far a heartbeat moves complete_by).
    within: float | None = None
    #: Where the call's entity lives (`ctx.call(..., entity=...)`): its partition and
    #: the resource with its details (`resolution.resource.info`). Resolved when the
    #: step was first sent and the same on every attempt; None when no entity was named.
    resolution: Resolution | None = None
    #: For a call to an exclusive agent: the key this process owns, its ownership
    #: epoch (bumped each time the key changes hands: give it to a resource that
    #: accepts a fencing token), and the key's durable owner state. Assign
    #: `owner_state` to change it: the new state is committed with this call's
    #: answer, in one transaction. None otherwise.
    owner_key: str | None = None
    owner_epoch: int | None = None
    owner_state: JsonValue = None
    #: For a call a reminder queued (`app.remind`): the reminder's name, and the tick
    #: (an instant) it stands for; None otherwise.
    reminder: str | None = None
    reminder_at: datetime | None = None
    _helpers: StepHelpers = field(default_factory=StepHelpers, repr=False, compare=False)
    _source: Request | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The request taken from the queue carries the step's recorded resolution.
        if self.resolution is None and self._source is not None:
            self.resolution = self._source.resolution

    @classmethod
    def of_step(
        cls,
        request: Request,
        helpers: StepHelpers,
        *,
        owner_key: str | None = None,
        owner_epoch: int | None = None,
        owner_state: JsonValue = None,
    ) -> AgentRequest:
        """What a step's handler receives for `request` (its first try), from the agent
        worker or, with `owner_key`, from the key's owner."""
        return cls(
            payload=request.payload,
            idempotency_key=idempotency_key(request.task_id, request.seq),
            attempt=request.attempt,
            retry=0,
            complete_by=request.complete_by,
            task_id=request.task_id,
            seq=request.seq,
            agent=request.agent,
            within=request.within,
            owner_key=owner_key,
            owner_epoch=owner_epoch,
            owner_state=owner_state,
            _helpers=helpers,
            _source=request,
        )

    def heartbeat(self) -> Awaitable[datetime]:
        """Tell the store this slow step is alive: its complete_by moves one window ahead.

        Call it from a long handler more often than the step's window. The handler's
        own deadline moves with it. Await it, on the event loop: the handler of a
        `threads=True` agent cannot call it.

        Returns:
            The new complete_by.

        Raises:
            StepSupersededError: The step is no longer this execution's (it was
                given up and sent again, or the task moved on); stop working.
            RuntimeError: Called outside the event loop (from a `threads=True`
                handler).
        """
        _on_the_loop("heartbeat")
        return self._helpers.heartbeat(self)

    def once(
        self, effect: Callable[[], Awaitable[JsonValue]], *, name: str | None = None
    ) -> Awaitable[JsonValue]:
        """Run a non-idempotent side effect at most once per step, and remember its result.

        The first execution marks the key `idempotency_key` (plus `/name` if given, for
        several effects in one handler) as started in the store, runs `effect`, and
        records its JSON result. Any later execution of the same step gets the
        recorded result without running `effect` again.

        If `effect` raises, the mark is removed and the exception propagates (the
        effect is taken not to have happened). If an execution died between
        starting and recording, nobody knows whether the effect happened: a later
        execution raises `PermanentError` saying so, and the operator decides
        (`shepherd retry TASK --step SEQ` clears the mark).

        Await it, on the event loop: the handler of a `threads=True` agent cannot
        call it.

        Returns:
            `effect`'s result, now or as recorded by an earlier execution.

        Raises:
            PayloadError: `name` is not a str, is longer than KEY_BYTES of
                UTF-8 (`shepherd.core.limits`), or holds a NUL or a lone surrogate.
            RuntimeError: Called outside the event loop (from a `threads=True`
                handler).
        """
        _on_the_loop("once")
        check_text("once name", name)
        key = self.idempotency_key if name is None else f"{self.idempotency_key}/{name}"
        return self._helpers.once(self, key, effect)


def _on_the_loop(method: str) -> None:
    """Refuse a call from a handler thread, which would make a coroutine nobody awaits."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(
            f"request.{method}() is async and runs on the event loop: the handler of a "
            "threads=True agent cannot call it (keep the handler async and run only the "
            "blocking call in a thread, with `await asyncio.to_thread(...)`)"
        ) from None
