"""`request.heartbeat()` and `request.once()` as an agent worker lends them to its handlers."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, final

from shepherd.agents.request import AgentRequest, StepHelpers
from shepherd.core.records import JsonValue
from shepherd.errors import OutcomeUnknownError, PayloadError, StepSupersededError

if TYPE_CHECKING:
    from shepherd.clock import Deadline
    from shepherd.core.records import Request
    from shepherd.store.roles import AgentStore, OwnerStore

__all__ = ["WorkerHelpers", "source_of"]

log = logging.getLogger("shepherd.agent")


@final
class WorkerHelpers(StepHelpers):
    """`request.heartbeat()` and `request.once()` for the requests of one worker.

    Args:
        store: The store, as an agent worker (or an exclusive owner) uses it.
        worker: The worker's name in the requests it takes.
    """

    def __init__(self, store: AgentStore | OwnerStore, *, worker: str) -> None:
        self.store = store
        self.worker = worker
        #: The deadline scope of each request being handled, by its queue id.
        self.scopes: dict[int, Deadline] = {}

    async def heartbeat(self, request: AgentRequest) -> datetime:
        """Move the step's deadlines in the store, then the handler's own deadline."""
        source = source_of(request)
        complete_by = await self.store.extend_step(source, worker=self.worker)
        if complete_by is None:
            raise StepSupersededError(request.task_id, request.seq, request.attempt)
        scope = self.scopes.get(source.id)
        if scope is not None and not scope.expired():
            scope.reschedule(complete_by, now=self.store.now())
        request.complete_by = complete_by
        return complete_by

    async def once(
        self,
        request: AgentRequest,
        key: str,
        effect: Callable[[], Awaitable[JsonValue]],
    ) -> JsonValue:
        """Mark `key` started (committed), run `effect`, record its result.

        A cancelled effect (the deadline passed, the process stops) leaves the
        mark `started`: nobody knows whether it happened.
        """
        store = self.store
        source = source_of(request)
        holder = f"{self.worker}:{source.id}:{request.attempt}"
        state, recorded = await store.begin_once(key, holder=holder)
        if state == "done":
            return recorded
        if state != "new":
            raise OutcomeUnknownError(
                f"side effect {key!r} was started by an earlier execution that never recorded "
                "its outcome: it may have happened. Check it with the remote service; then "
                f"`shepherd retry {request.task_id} --step {request.seq}` clears the mark and "
                "runs the step again",
                agent=request.agent,
                seq=request.seq,
                detail={"key": key, "done_key": "started"},
            )
        try:
            result = await effect()
        except Exception:
            try:
                await store.abandon_once(key, holder=holder)
            except Exception:  # the mark stays started: the operator decides
                log.exception("could not remove the started mark of %r", key)
            raise
        try:
            recorded_now = await store.finish_once(key, holder=holder, result=result)
        except PayloadError as exc:
            raise OutcomeUnknownError(
                f"side effect {key!r} happened but its result cannot be recorded ({exc}); "
                "its mark stays started",
                agent=request.agent,
                seq=request.seq,
                detail={"key": key, "done_key": "started"},
            ) from exc
        if not recorded_now:
            log.warning("the started mark of %r was cleared while its effect ran", key)
        return result


def source_of(request: AgentRequest) -> Request:
    """The queued request behind a handler's AgentRequest."""
    source = request._source
    if source is None:
        raise RuntimeError("this AgentRequest was not made by an agent worker")
    return source
