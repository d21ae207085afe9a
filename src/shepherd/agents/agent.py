"""`Agent`: a registered agent, its handler and the options it was registered with."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.agents.request import AgentRequest
from shepherd.core.records import JsonValue

if TYPE_CHECKING:
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.records import CallRequest, Request
    from shepherd.core.retry import RetryPolicy
    from shepherd.governance.batch import Batch

__all__ = ["Agent", "BlockingHandler", "Handler", "OwnerHook"]

Handler = Callable[[AgentRequest], Awaitable[JsonValue]]
#: The handler of a `threads=True` agent: a plain function, run in a thread.
BlockingHandler = Callable[[AgentRequest], JsonValue]
#: An exclusive agent's `on_acquire(key, state)` or `on_release(key, state)`: an
#: `async def`, or a plain `def` (run in a thread); see `shepherd.governance.lifecycle`.
OwnerHook = Callable[[str, JsonValue], Awaitable[None] | None]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Agent:
    """A registered agent: its handler and its policies."""

    name: str
    fn: Handler | BlockingHandler
    retry: RetryPolicy
    #: Default step window for calls to this agent (seconds), or the app default.
    within: float | None = None
    #: The circuit breaker policy of the agent's service, or None for no breaker.
    breaker: BreakerPolicy | None = None
    #: The remote service's name; agents naming the same service share one breaker.
    service: str | None = None
    #: Whether `fn` is a plain function run in a thread (else an `async def`).
    threads: bool = False
    #: The resource whose capacity slot a handling holds (else the resolution's, if any).
    resource: str | None = None
    #: For an exclusive agent: the payload field, or the function of the payload,
    #: giving each call's owning key (one owner process per key at a time).
    exclusive_by: str | Callable[[JsonValue], object] | None = None
    #: For an exclusive agent: how its owner gathers a key's calls into one
    #: handling (the handler then takes and returns lists), or None.
    batch: Batch | None = None
    #: For an exclusive agent: run before an ownership's first handling of a key
    #: (`shepherd.governance.lifecycle`), or None.
    on_acquire: OwnerHook | None = None
    #: For an exclusive agent: run when an ownership of a key ends cleanly, or None.
    on_release: OwnerHook | None = None
    #: For an exclusive agent: seconds without a handling after which an owner
    #: hands its key back (None: it keeps it while its process lives).
    owner_idle: float | None = None

    @property
    def service_name(self) -> str:
        """The service whose breaker this agent uses (default: the agent's name)."""
        return self.service or self.name

    def resource_of(self, request: Request | CallRequest) -> str | None:
        """The resource a handling of `request` (a step's, or a durable call's) holds a
        slot of and takes rate tokens of, or None."""
        if self.resource is not None:
            return self.resource
        if request.resolution is not None:
            return request.resolution.resource.name
        return None
