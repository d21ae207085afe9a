"""A registered workflow: its function, its supervision policy and the agents it declares.

`App.workflow` makes them; the scheduler runs their functions and the
supervisor applies their policies, both reading them by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from shepherd.core.records import JsonValue
from shepherd.core.supervision import SupervisionPolicy

if TYPE_CHECKING:
    from shepherd.scheduler.context import WorkflowContext

__all__ = ["Workflow", "WorkflowFn"]

#: A workflow function: `async def flow(ctx, data) -> result`.
WorkflowFn = Callable[["WorkflowContext", Any], Awaitable[JsonValue]]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Workflow:
    """A registered workflow: its function, its supervision policy, its declared agents."""

    name: str
    fn: WorkflowFn
    complete_within: float
    policy: SupervisionPolicy
    #: Agents it may call that a scan of its source cannot see (checked at start).
    agents: tuple[str, ...] = ()
    #: Seconds each of its tasks has to end once due, unless its submit gives its own
    #: (`core.timing`); None for no deadline.
    deadline: float | None = None
