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
    #: After a crash: the task's crashes and owner deaths to record (None: unchanged).
    crashes: tuple[str, ...] | None = None
    owner_deaths: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalate:
    """Move the task to `error` and alert an operator."""

    failure_count: int
    reason: str
    crashes: tuple[str, ...] | None = None
    owner_deaths: int | None = None


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


#: Why an expired claim is forgiven: the expiry is not the task's failure.
STORE_OUTAGE = "complete_by passed while the store was unreachable"
PROBATION = "complete_by passed while its step waited in line to run apart from other suspects"
RECOVERY = "complete_by passed while its step waited for an agent as crashed or frozen workers were recovered"


def on_store_outage(task: Task, *, now: datetime, why: str = STORE_OUTAGE) -> Reset:
    """Reset a task whose claim expired through no fault of its own.

    `why` says what kept it from making progress: the store could not be
    reached (the default), or its step waited in the probation line
    (`PROBATION`). The expiry is not the task's failure: `failure_count` stays
    as it is and the task is claimable at once.

    Args:
        task: The expired task (see `is_expired`).
        now: The current instant (aware UTC).
        why: The reason's first half.
    """
    compensating = task.process_state is ProcessState.COMPENSATING
    return Reset(
        failure_count=task.failure_count,
        not_before=now,
        process_state=ProcessState.COMPENSATING if compensating else ProcessState.PENDING,
        reason=f"{why}; not counted as a failure",
    )


#: A process whose last beat is older than this many beats may be frozen, cut off
#: or dead: an expired claim it holds is not charged until the registry decides.
SILENT_BEATS = 1.5
#: A process silent for this many beats while a claim it holds has expired froze.
FROZEN_BEATS = 2.0


def is_silent(
    beat_at: datetime, *, now: datetime, beat: float, beats: float = SILENT_BEATS
) -> bool:
    """Whether a process that last beat at `beat_at` has missed its beats at `now`.

    Args:
        beat_at: Its last beat (the store's clock).
        now: The store's clock.
        beat: Seconds between a live process's beats (`worker_beat`).
        beats: How many beats of silence count.
    """
    return beat_at + timedelta(seconds=beats * beat) < now


@dataclass(frozen=True, slots=True, kw_only=True)
class Expiry:
    """What the supervisor knows of an expired claim besides the task itself.

    Attributes:
        silent: A process holding the claim (its owner, or the agent running its
            step) has not been seen alive since the claim expired: it has not
            beaten since, or has missed its beats. The worker registry has yet
            to say whether it froze or died (its crash attribution then resets
            the task without a failure), or whether it lives and the expiry is
            the task's own.
        probation: Its step is a suspect's that has waited in line, untaken, to
            run apart from other suspects.
        recovery: Its step has waited in the queue, untaken, since before a
            crash or freeze was attributed: the agents it waited for were dead,
            frozen, or busy recovering their tasks.
        outage: Its complete_by passed while the store could not be reached.
        running: A step of it is taken and still inside its own window (a
            suspect's window starts when it is taken, just before its claim is
            carried along): the step's own deadline decides, not the claim's.
    """

    silent: bool = False
    running: bool = False
    probation: bool = False
    recovery: bool = False
    outage: bool = False


def on_claim_expired(
    task: Task, policy: SupervisionPolicy, expiry: Expiry, *, now: datetime, rng: random.Random
) -> Decision | None:
    """Decide what to do with an expired claim, charging the task only for its own failure.

    A fault is never the task's failure: a claim held by a silent process is
    left for a later scan (None) until the registry decides, and so is one whose
    step is still inside its own window; one that expired in
    probation, while workers were recovered, or in a store outage is reset at
    once without a failure counted. Otherwise `on_expired` counts the failure.
    """
    if expiry.silent or expiry.running:
        return None
    if expiry.probation:
        return on_store_outage(task, now=now, why=PROBATION)
    if expiry.recovery:
        return on_store_outage(task, now=now, why=RECOVERY)
    if expiry.outage:
        return on_store_outage(task, now=now)
    return on_expired(task, policy, now=now, rng=rng)


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashPolicy:
    """How crashes of worker processes are attributed to the tasks they ran.

    Attributes:
        poison_crashes: A task that was running (a step of it executing) in this
            many processes that crashed is quarantined in `error` as suspected
            poison.
        max_owner_deaths: A task whose claim's owner died more often than this
            goes to `error` (a crash that strikes while no step runs, e.g. in
            workflow code, is bounded here).

    Raises:
        ValueError: A field is out of range.
    """

    poison_crashes: int = 3
    max_owner_deaths: int = 10

    def __post_init__(self) -> None:
        if self.poison_crashes < 1:
            raise ValueError(f"poison_crashes must be >= 1, got {self.poison_crashes!r}")
        if self.max_owner_deaths < 1:
            raise ValueError(f"max_owner_deaths must be >= 1, got {self.max_owner_deaths!r}")


def crash_entry(instance: str, seq: int) -> str:
    """How a task records a crash: the process and the step that was running in it."""
    return f"{instance}#{seq}"


def crashed_instances(crashes: tuple[str, ...]) -> tuple[str, ...]:
    """The distinct processes in a task's crash entries, in order."""
    return tuple(dict.fromkeys(entry.rsplit("#", 1)[0] for entry in crashes))


def crashes_at(crashes: tuple[str, ...], seq: int) -> tuple[str, ...]:
    """The crash entries of step `seq`."""
    suffix = f"#{seq}"
    return tuple(entry for entry in crashes if entry.endswith(suffix))


def crashed_at(crashes: tuple[str, ...], seq: int) -> bool:
    """Whether step `seq` was running at one of the task's crashes."""
    suffix = f"#{seq}"
    return any(entry.endswith(suffix) for entry in crashes)


#: A step seen running at this many crashes (of distinct processes or freezes)
#: runs apart from other suspects afterwards. A task merely in flight at one
#: crash runs again at full concurrency, as if nothing had happened.
SUSPECT_CRASHES = 2


def suspected(crashes: tuple[str, ...], seq: int) -> bool:
    """Whether step `seq` was running at `SUSPECT_CRASHES` crashes: it runs apart."""
    return len(crashed_instances(crashes_at(crashes, seq))) >= SUSPECT_CRASHES


def _what(processes: tuple[str, ...]) -> str:
    """ "crashes", "freezes" (episodes `instance@ms`), or both, for a reason."""
    frozen = sum("@" in p for p in processes)
    if not frozen:
        return "crashes"
    return "freezes" if frozen == len(processes) else "crashes or freezes"


def pids_of(instances: tuple[str, ...]) -> str:
    """`host:pid` of each instance (`host:pid:suffix`), for an operator's message."""
    return ", ".join(instance.split("@", 1)[0].rsplit(":", 1)[0] for instance in instances)


def on_crash(
    task: Task,
    *,
    instance: str,
    owned: bool,
    running: int | None,
    policy: CrashPolicy,
    now: datetime,
    how: str = "crashed",
) -> Reset | Escalate | None:
    """Decide what a crash of process `instance` means for `task`.

    A crash is not the task's failure: `failure_count` never changes here.
    A task whose step was running in the crashed process records it (the
    process and the step join its `crashes`): a step seen at one crash runs
    again at full concurrency; at `SUSPECT_CRASHES` it becomes a suspect and
    runs apart from other suspects (`suspected`); at `policy.poison_crashes`
    crashes of distinct processes it is quarantined in `error` with an alert.
    Otherwise a task the crashed process owned or ran is reset at once,
    claimable again, unless its owners died more than
    `policy.max_owner_deaths` times.

    Args:
        task: A task in a supervised state, owned by `instance`'s scheduler or
            with a request taken by `instance`'s agent.
        instance: The crashed process.
        owned: Whether `instance` owned the task's claim.
        running: The seq of the task's step that was running in `instance`, or None.
        policy: The crash policy.
        now: The current instant (aware UTC).
        how: What happened to the process, for the reason: "crashed", or "froze"
            (it stopped beating while alive: a freeze is an episode of its own,
            `instance` then names the episode).
    """
    crashes = task.crashes
    if running is not None:
        entry = crash_entry(instance, running)
        if entry not in crashes:
            crashes = (*crashes, entry)
    deaths = task.owner_deaths + 1 if owned else task.owner_deaths
    # A poison kills whatever runs it, at the same step each time; a healthy task
    # that only shared processes with one is caught at different steps (a step
    # that was running at a crash runs apart from other suspects afterwards).
    processes = () if running is None else crashed_instances(crashes_at(crashes, running))
    if running is not None and len(processes) >= policy.poison_crashes:
        return Escalate(
            failure_count=task.failure_count,
            reason=(
                f"suspected poison: running at {len(processes)} worker {_what(processes)} "
                f"(pids {pids_of(processes)}), each time in step {running}"
            ),
            crashes=crashes,
            owner_deaths=deaths,
        )
    if owned and deaths > policy.max_owner_deaths:
        return Escalate(
            failure_count=task.failure_count,
            reason=(
                f"the process owning the task died {_times(deaths)} "
                f"(max_owner_deaths={policy.max_owner_deaths})"
            ),
            crashes=crashes,
            owner_deaths=deaths,
        )
    if not owned and running is None:
        return None
    # Reset at once, even when another (live) scheduler holds the claim: the step
    # that was running in the dead process must be sent again before its window
    # passes, and a new epoch fences the old claim off.
    compensating = task.process_state is ProcessState.COMPENSATING
    where = (
        f"its step {running} was running there"
        if running is not None
        else "no step of it was running there"
    )
    return Reset(
        failure_count=task.failure_count,
        not_before=now,
        process_state=ProcessState.COMPENSATING if compensating else ProcessState.PENDING,
        reason=f"process {pids_of((instance,))} {how} ({where}); not counted as a failure",
        crashes=crashes,
        owner_deaths=deaths,
    )
