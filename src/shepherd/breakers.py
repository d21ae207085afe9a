"""The circuit breaker in the agent worker: a shell around `shepherd.core.breaker`.

(Placeholder: calls always go through until the shared breaker lands.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from shepherd.agent import Agent
    from shepherd.app import App
    from shepherd.core.records import Request

__all__ = ["BreakerGate"]


@final
class BreakerGate:
    """Asks the shared breaker of an agent's service before each try, and reports after."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def before_call(self, agent: Agent, request: Request) -> None:
        """Return when a try may be made now; wait while the service's breaker is open.

        The caller's deadline scope cancels the wait when complete_by passes.
        """

    async def after_call(self, agent: Agent, request: Request, *, failed: bool) -> None:
        """Report a try's outcome: `failed` for a transient failure or a hang."""
