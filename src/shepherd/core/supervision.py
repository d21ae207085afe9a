"""The Supervisor's rule: what happens to a task whose claim expired.

`on_expired` counts the failure and decides: reset the task for another try after a
backoff, escalate it to an operator, or compensate it. It knows nothing of business
logic; `transitions.apply` turns the decision into the new task record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from shepherd.core.retry import capped_exponential
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    import random
    from datetime import datetime

    from shepherd.core.records import Task

#: States in which a task is worked on under a claim that can expire.
SUPERVISED_STATES: frozenset[ProcessState] = frozenset(
    {ProcessState.PROCESSING, ProcessState.COMPENSATING}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackoffPolicy:
    """How long a reset task waits before it may be claimed again.

    The wait after the n-th failure is `min(max_delay, initial * multiplier ** (n - 1))`,
    then moved by up to `jitter` of itself either way.

    Attributes:
        initial: Seconds before the first re-claim; at least 0.
        multiplier: Growth factor per failure; at least 1.
        max_delay: Cap on the wait before jitter, in seconds; at least `initial`.
        jitter: Fraction of the wait added or removed at random; from 0 to 1.

    Raises:
        ValueError: A field is out of range; the message names the field.
    """

    initial: float = 0.0
    multiplier: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.initial) and self.initial >= 0):
            raise ValueError(f"initial must be a finite number >= 0, got {self.initial!r}")
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1):
            raise ValueError(f"multiplier must be a finite number >= 1, got {self.multiplier!r}")
        if not (math.isfinite(self.max_delay) and self.max_delay >= self.initial):
            raise ValueError(
                f"max_delay must be a finite number >= initial ({self.initial!r}), "
                f"got {self.max_delay!r}"
            )
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def delay(self, failures: int, rng: random.Random) -> float:
        """Return the wait, in seconds, after `failures` (at least 1) failures."""
        base = capped_exponential(self.initial, self.multiplier, self.max_delay, failures - 1)
        return max(0.0, base * (1.0 + rng.uniform(-self.jitter, self.jitter)))


@dataclass(frozen=True, slots=True, kw_only=True)
class SupervisionPolicy:
    """A workflow's policy for expired claims.

    Attributes:
        max_failures: Expirations tolerated; the one that reaches it exhausts the task.
        on_exhausted: What an exhausted task does: go to `error` and alert an
            operator, or `compensate` (undo its completed steps).
        backoff: The wait before a reset task may be claimed again.

    Raises:
        ValueError: A field is out of range; the message names the field.
    """

    max_failures: int = 3
    on_exhausted: Literal["error", "compensate"] = "error"
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)

    def __post_init__(self) -> None:
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int):
            raise ValueError(f"max_failures must be an integer, got {self.max_failures!r}")
        if self.max_failures < 1:
            raise ValueError(f"max_failures must be >= 1, got {self.max_failures!r}")
        if self.on_exhausted not in ("error", "compensate"):
            raise ValueError(
                f"on_exhausted must be 'error' or 'compensate', got {self.on_exhausted!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reset:
    """Make the task claimable again after `not_before`, under a new `lock_epoch`.

    `process_state` is `compensating` if the task was compensating, else `pending`.
    """

    failure_count: int
    not_before: datetime
    process_state: ProcessState
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalate:
    """Move the task to `error` and alert an operator."""

    failure_count: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Compensate:
    """Move the task to `compensating`, unowned and claimable at once.

    `failure_count` restarts at 0: compensation has its own budget of failures.
    """

    failure_count: int
    reason: str


Decision = Reset | Escalate | Compensate


def is_expired(task: Task, *, now: datetime) -> bool:
    """Whether `task` is claimed and its claim's `complete_by` is in the past."""
    return (
        task.process_state in SUPERVISED_STATES
        and task.locked_by is not None
        and task.complete_by is not None
        and task.complete_by < now
    )


def _times(n: int) -> str:
    return "1 time" if n == 1 else f"{n} times"


def on_expired(
    task: Task, policy: SupervisionPolicy, *, now: datetime, rng: random.Random
) -> Decision:
    """Decide what to do with a task whose `complete_by` has passed.

    The expiry counts as one more failure. Below `policy.max_failures` the task is
    reset, to be claimed again after the backoff; at the threshold a forward task is
    escalated or compensated as `policy.on_exhausted` says, and a compensating task
    is escalated.

    Args:
        task: The expired task (see `is_expired`).
        policy: The workflow's supervision policy.
        now: The current instant (aware UTC).
        rng: The source of jitter for the backoff.
    """
    failures = task.failure_count + 1
    expired = f"complete_by expired {_times(failures)} (max_failures={policy.max_failures})"
    compensating = task.process_state is ProcessState.COMPENSATING
    if failures < policy.max_failures:
        delay = policy.backoff.delay(failures, rng)
        return Reset(
            failure_count=failures,
            not_before=now + timedelta(seconds=delay),
            process_state=ProcessState.COMPENSATING if compensating else ProcessState.PENDING,
            reason=f"{expired}; claimable again in {delay:.3g}s",
        )
    if compensating:
        return Escalate(failure_count=failures, reason=f"compensation could not finish: {expired}")
    if policy.on_exhausted == "compensate":
        return Compensate(failure_count=0, reason=f"{expired}; compensating")
    return Escalate(failure_count=failures, reason=expired)


def on_store_outage(task: Task, *, now: datetime) -> Reset:
    """Reset a task whose claim expired while the store could not be reached.

    Nobody could make progress then, so the expiry is not the task's failure:
    `failure_count` stays as it is and the task is claimable at once.

    Args:
        task: The expired task (see `is_expired`).
        now: The current instant (aware UTC).
    """
    compensating = task.process_state is ProcessState.COMPENSATING
    return Reset(
        failure_count=task.failure_count,
        not_before=now,
        process_state=ProcessState.COMPENSATING if compensating else ProcessState.PENDING,
        reason="complete_by passed while the store was unreachable; not counted as a failure",
    )
