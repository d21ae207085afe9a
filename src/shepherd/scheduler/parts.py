"""What a scheduler's workflow contexts and task endings work with.

The scheduler makes one `SchedulerParts` and hands it to every context it
drives: its store, its name in claims, its clock, the registered agents, its
reply mailbox and the agent worker of its own process. Contexts reach these,
never the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, final

if TYPE_CHECKING:
    from collections.abc import Mapping

    from shepherd.agents import Agent
    from shepherd.agents.pending import PendingReply
    from shepherd.alerts import RaiseAlert
    from shepherd.clock import Clock
    from shepherd.core.records import Request
    from shepherd.governance.resolver import Resolver
    from shepherd.metrics import WorkflowCounters
    from shepherd.scheduler.mailbox import ReplyMailbox
    from shepherd.store.roles import SchedulerStore

__all__ = ["ChildSpec", "SchedulerParts", "Taker"]


class ChildSpec(Protocol):
    """What a child's start needs of its registered workflow (`scheduler.children`)."""

    @property
    def complete_within(self) -> float:
        """The child's claim window."""
        ...


class Taker(Protocol):
    """The agent worker of a scheduler's own process, as the scheduler hands it requests."""

    def reserve(self, agent: str) -> str | None:
        """Hold a free slot for a request of `agent`: the worker's name, or None."""
        ...

    def unreserve(self) -> None:
        """Give back a held slot: its request was not queued."""
        ...

    def hand(self, request: Request) -> None:
        """Handle a request the store leased to this worker as it was queued."""
        ...


@final
@dataclass(slots=True, kw_only=True, eq=False)
class SchedulerParts:
    """One scheduler's store, name, clock, registrations, mailbox and local agent worker."""

    store: SchedulerStore
    #: The scheduler's name in the claims it takes.
    locked_by: str
    clock: Clock
    #: The registered agents, by name: the only ones a step may call.
    agents: Mapping[str, Agent]
    #: A step's window when neither its call nor its agent sets one.
    default_step_within: float
    #: Where the entities of `ctx.call(..., entity=...)` live; None: such a call fails.
    resolver: Resolver | None
    #: Where task ends are counted.
    counters: WorkflowCounters
    #: How a task that ends in `error` reaches an operator.
    raise_alert: RaiseAlert
    #: Where each running step waits for its reply, and the scheduler posts it.
    mailbox: ReplyMailbox
    #: The registered workflows, by name: the only ones a child may run (`ctx.run_workflow`).
    workflows: Mapping[str, ChildSpec] = field(default_factory=dict)
    #: The agent worker of this process, if one runs here: steps of the agents it
    #: hosts go straight to it (`WorkflowContext._send`).
    taker: Taker | None = None
    #: By task: replies of this process's agent worker handed to their steps before
    #: their commit, for the task's next write to take (`scheduler.replied`).
    pending: dict[str, list[PendingReply]] = field(default_factory=dict)

    def step_within(self, agent: str) -> float:
        """The window of a step of `agent` whose call sets none: the agent's, else the default."""
        spec = self.agents.get(agent)
        if spec is not None and spec.within is not None:
            return spec.within
        return self.default_step_within
