"""What a scheduler's workflow contexts and task endings work with.

The scheduler makes one `SchedulerParts` and hands it to every context it
drives: its store, its name in claims, its clock, the registered agents, its
reply mailbox and the agent worker of its own process. Contexts reach these,
never the scheduler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
    from shepherd.store.ops import (
        EndChild,
        FailTask,
        FinishTask,
        OwnerTake,
        SleepTask,
        StartChild,
        StartCompensation,
        StartStep,
        WaitChildren,
        WaitSignal,
    )
    from shepherd.store.roles import SchedulerStore

    #: A write of a task that may carry its replies (`reply_then`) or its claim.
    Then = (
        StartStep
        | FinishTask
        | FailTask
        | StartCompensation
        | SleepTask
        | WaitSignal
        | StartChild
        | WaitChildren
        | EndChild
    )

__all__ = ["ChildSpec", "Claim", "Owners", "SchedulerParts", "Taker"]


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


class Owners(Protocol):
    """The exclusive owners of a scheduler's own process, as the scheduler hands them steps."""

    def owner_take(self, agent: str, key: str) -> OwnerTake | None:
        """The fence to take a step of `agent` for `key` under as it is queued, or None."""
        ...

    def hand(self, agent: str, key: str, request: Request, *, epoch: int) -> None:
        """Give the key's loop of ownership `epoch` a request the store took for it."""
        ...


@final
class Claim:
    """A peeked task's claim to come: the epoch it was peeked at, and its writers' turns.

    Args:
        epoch: The task's `lock_epoch` as peeked (the claim bumps it by one).
        claimed: Called once the claim is made.
    """

    __slots__ = ("claimed", "epoch", "turn")

    def __init__(self, epoch: int, claimed: Callable[[], None]) -> None:
        self.epoch = epoch
        self.claimed = claimed
        self.turn = asyncio.Lock()


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
    #: The exclusive owners of this process, if its agent role runs here: a step to
    #: a key owned here goes straight to the key's loop (`scheduler.owned`).
    owners: Owners | None = None
    #: By task: replies of this process's agent worker handed to their steps before
    #: their commit, for the task's next write to take (`scheduler.replied`).
    pending: dict[str, list[PendingReply]] = field(default_factory=dict)
    #: By task: waits for signals its workflow found in its inbox and went on with
    #: (with each signal's id),
    #: for the task's next write to consume (`scheduler.signalling`); the task is
    #: in `pending` meanwhile (its list maybe empty), so that the write looks.
    waits: dict[str, list[tuple[WaitSignal, int]]] = field(default_factory=dict)
    #: By task: replies taken before such a wait looked in the inbox, kept for that write.
    carried: dict[str, list[PendingReply]] = field(default_factory=dict)
    #: By task: the tasks this scheduler peeked at and drives before it holds them,
    #: whose first write claims them (`scheduler.claiming`).
    claiming: dict[str, Claim] = field(default_factory=dict)
