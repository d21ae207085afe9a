"""One handling of a request by an agent worker: what happens next, decided.

A `Handling` is a small state machine. Its shell (`agents/worker.py`) asks it
what to do, does it, and tells it what happened: wait for a capacity slot of
the request's resource (once), then before each try for the service's circuit
breaker and for a rate token of the resource; try the handler; after a failed
try, tell the breaker (a transient failure only: a bug says nothing about the
service), then wait before the next try or end. A handling ends in one of:

- `ReplyResult`: the handler returned; reply its result.
- `ReplyError`: a permanent failure, an unknown resource, an unreadable retry
  policy, or a bug out of tries; reply the error (the step fails). A caller
  that must not wait on an open breaker (a durable call, `app.call`) ends
  there too (`breaker_open`).
- `GiveUp`: a transient failure out of tries, or whose next try would start
  past `complete_by`; reply nothing (the supervisor sees `complete_by` pass).
- `TimedOut`: `complete_by` passed first; reply nothing (someone else may
  already be retrying the step), and say why: held back by the resource's
  capacity or rate or by the breaker, or a try or the wait before one cut.
- `Superseded`: the handler found the step is no longer this execution's.

Pure: time, the step's deadline and randomness are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Literal, final

from shepherd.core.retry import RetryPolicy, next_retry

if TYPE_CHECKING:
    import random
    from datetime import datetime

    from shepherd.core.records import JsonValue

__all__ = [
    "SUPERSEDED",
    "End",
    "Enter",
    "Failed",
    "FailureKind",
    "GiveUp",
    "Handling",
    "Next",
    "Phase",
    "ReplyError",
    "ReplyResult",
    "Retry",
    "Superseded",
    "TimedOut",
    "begin",
]

#: What a handler's exception means: worth asking the service again, refused by
#: it, or anything else (a bug: retried like a transient failure, then replied).
FailureKind = Literal["transient", "permanent", "bug"]


class Phase(StrEnum):
    """What a handling does now: the shell's next wait, and a timeout's cause."""

    #: Waiting for a capacity slot of the request's resource.
    SLOT = "slot"
    #: Waiting for the service's circuit breaker to let a try through.
    BREAKER = "breaker"
    #: Waiting for a rate token of the request's resource.
    RATE = "rate"
    #: Running the handler.
    TRY = "try"
    #: Telling the service's breaker that the try failed.
    REPORT = "report"
    #: Waiting before the next try (`Retry`).
    BACKOFF = "backoff"


@final
@dataclass(frozen=True, slots=True)
class Retry:
    """Wait `delay` seconds, then try again."""

    delay: float


@final
@dataclass(frozen=True, slots=True)
class ReplyResult:
    """The handler returned: reply its result (the shell holds it).

    `answered`: tell the service's breaker first that the service answered.
    """

    answered: bool


#: The two `ReplyResult`s: a success decides without allocating.
_REPLY = ReplyResult(answered=False)
_REPLY_ANSWERED = ReplyResult(answered=True)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyError:
    """Reply `error`: the step fails, and the workflow (or, for a bug, an operator) decides."""

    error: BaseException
    #: A bug out of tries: replied with its traceback and `tries`.
    bug: bool
    tries: int
    #: Tell the service's breaker that the service answered (a refusal is an answer).
    answered: bool


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class GiveUp:
    """A transient failure out of tries or time: reply nothing, note `error` in the history."""

    error: BaseException
    tries: int


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TimedOut:
    """`complete_by` passed first: reply nothing, note why in the history."""

    #: What the handling was doing at `complete_by`.
    cause: Phase
    tries: int
    #: Held back (by capacity, rate or breaker): the noted error, naming what
    #: held the handling back; None when a try or the wait before one was cut.
    held_back: dict[str, str] | None
    #: The last failed try's error, if any (noted when not held back), and
    #: whether it was a bug.
    failure: BaseException | None
    bug: bool
    #: A try was in flight: for the service's breaker, a failure.
    hung: bool


@final
@dataclass(frozen=True, slots=True)
class Failed:
    """A failed try: its error and kind, and the delay its service asked for."""

    error: BaseException
    kind: FailureKind
    retry_after: float | None


@final
@dataclass(frozen=True, slots=True)
class Superseded:
    """The step is no longer this execution's: reply nothing, note nothing."""


#: The one `Superseded`.
SUPERSEDED = Superseded()

#: The phases a handling is told to enter: all but BACKOFF, which a `Retry` enters.
Enter = Literal[Phase.SLOT, Phase.BREAKER, Phase.RATE, Phase.TRY, Phase.REPORT]
#: How a handling ends.
End = ReplyResult | ReplyError | GiveUp | TimedOut | Superseded
#: What a handling does next: a wait or a try, a retry after a wait, or its end.
Next = Enter | Retry | End

#: The reasons noted for a handling held back until complete_by: the error's type
#: and message, by what held it back.
_HELD_BACK = {
    Phase.SLOT: ("CapacityFull", "every slot of resource {name!r} stayed taken until complete_by"),
    Phase.RATE: (
        "RateLimited",
        "no call to resource {name!r} was allowed by its rate before complete_by",
    ),
    Phase.BREAKER: ("BreakerOpen", "the circuit breaker of {name!r} stayed open"),
}


def begin(
    *,
    complete_by: datetime,
    now: datetime,
    retry: JsonValue,
    policy: RetryPolicy,
    resource: str | None,
    service: str | None,
) -> Handling | ReplyError | None:
    """Begin handling a request, or end at once.

    Args:
        complete_by: The request's deadline.
        now: The current instant, on the deadline's clock.
        retry: The retry policy the request carries (`RetryPolicy.to_json()`), or None.
        policy: The agent's retry policy, used when the request carries none.
        resource: The resource whose slot the handling holds and whose rate
            each try obeys, or None.
        service: The service whose circuit breaker each try asks, or None.

    Returns:
        The handling; a `ReplyError` if the request's retry policy cannot be
        read; None if `complete_by` has passed (nothing to do: the supervisor
        sees it pass).
    """
    if complete_by <= now:
        return None
    if retry is not None:
        try:
            policy = RetryPolicy.from_json(retry)
        except ValueError as exc:
            return ReplyError(error=exc, bug=False, tries=0, answered=False)
    return Handling(policy, resource, service)


@final
class Handling:
    """Where one handling of a request stands; each event's method returns what is next.

    Start with `start()`; then, for each `Phase` returned, tell what happened:
    SLOT: `slot_taken()` (or `refused()`); BREAKER: `breaker_passed()` (or
    `breaker_open()`, for a caller that does not wait on an open breaker); RATE:
    `token_taken()` (or `refused()`); TRY: `succeeded()`, `failed()` or
    `superseded()`; REPORT: `reported()`; after a `Retry`'s wait: `slept()`.
    At `complete_by`, whatever the phase: `expired()`. An `End` is final.

    Args:
        policy: The retry policy.
        resource: The resource whose slot the handling holds and whose rate
            each try obeys, or None.
        service: The service whose circuit breaker each try asks, or None.
    """

    __slots__ = ("last", "phase", "policy", "resource", "retries", "service", "tries")

    def __init__(self, policy: RetryPolicy, resource: str | None, service: str | None) -> None:
        self.policy = policy
        self.resource = resource
        self.service = service
        #: What the handling does now.
        self.phase = Phase.SLOT
        #: Tries started.
        self.tries = 0
        #: Failed tries followed by a decision to try again or not (the handler's
        #: `retry` on its next try).
        self.retries = 0
        #: The last failed try, if any.
        self.last: Failed | None = None

    def start(self) -> Enter:
        """The first thing to do: wait for a slot, the breaker or a token, or try."""
        if self.resource is not None:
            return Phase.SLOT  # self.phase already
        if self.service is not None:
            self.phase = Phase.BREAKER
            return Phase.BREAKER
        self.tries = 1
        self.phase = Phase.TRY
        return Phase.TRY

    def slot_taken(self) -> Enter:
        """The handling holds its slot (or the resource has no capacity)."""
        return self._before_try()

    def breaker_passed(self) -> Enter:
        """The service's breaker lets a try through."""
        if self.resource is not None:
            self.phase = Phase.RATE
            return Phase.RATE
        return self._try()

    def breaker_open(self, error: BaseException) -> ReplyError:
        """The service's breaker is open and the caller does not wait: reply `error`.

        Not an answer of the service: its breaker is told nothing.
        """
        return ReplyError(error=error, bug=False, tries=self.tries, answered=False)

    def token_taken(self) -> Enter:
        """The try spent a rate token of the resource (or it has no rate)."""
        return self._try()

    def refused(self, error: BaseException) -> ReplyError:
        """The resource does not exist (found waiting for a slot or a token)."""
        return ReplyError(error=error, bug=False, tries=self.tries, answered=self._answered())

    def succeeded(self) -> ReplyResult:
        """The try returned a result."""
        return _REPLY if self.service is None else _REPLY_ANSWERED

    def superseded(self) -> Superseded:
        """The try raised that its step is no longer this execution's."""
        return SUPERSEDED

    def failed(
        self,
        error: BaseException,
        kind: FailureKind,
        *,
        retry_after: float | None,
        now: datetime,
        complete_by: datetime,
        rng: random.Random,
    ) -> Enter | Retry | ReplyError | GiveUp:
        """The try raised `error` of `kind`; the service may have asked to wait `retry_after` s.

        A permanent failure is replied. A transient one is first told to the
        breaker (REPORT, then `reported()`), if there is one. Otherwise: the
        next try after a delay (the retry policy's backoff, at least
        `retry_after`), unless the tries are spent or it would start at or after
        `complete_by` (read against `now`): then a bug is replied, a transient
        failure given up.
        """
        self.last = Failed(error, kind, retry_after)
        if kind == "permanent":
            return ReplyError(error=error, bug=False, tries=self.tries, answered=self._answered())
        if kind == "transient" and self.service is not None:
            self.phase = Phase.REPORT
            return Phase.REPORT
        return self._after_failure(now=now, complete_by=complete_by, rng=rng)

    def reported(
        self, *, now: datetime, complete_by: datetime, rng: random.Random
    ) -> Retry | ReplyError | GiveUp:
        """The breaker was told of the failed try: what `failed()` decides then."""
        return self._after_failure(now=now, complete_by=complete_by, rng=rng)

    def slept(self) -> Enter:
        """The wait before the next try is over."""
        return self._before_try()

    def expired(self) -> TimedOut:
        """`complete_by` passed, in the current phase."""
        cause = self.phase
        reason = _HELD_BACK.get(cause)
        held_back = None
        if reason is not None:
            name = self.service if cause is Phase.BREAKER else self.resource
            held_back = {"type": reason[0], "message": reason[1].format(name=name)}
        last = self.last
        return TimedOut(
            cause=cause,
            tries=self.tries,
            held_back=held_back,
            failure=None if last is None else last.error,
            bug=last is not None and last.kind == "bug",
            hung=self.service is not None and cause in (Phase.TRY, Phase.REPORT),
        )

    # -- within ----------------------------------------------------------------
    def _before_try(self) -> Enter:
        if self.service is not None:
            self.phase = Phase.BREAKER
            return Phase.BREAKER
        if self.resource is not None:
            self.phase = Phase.RATE
            return Phase.RATE
        return self._try()

    def _try(self) -> Enter:
        self.tries += 1
        self.phase = Phase.TRY
        return Phase.TRY

    def _answered(self) -> bool:
        """Whether the service answered (for its breaker): a try was made, not ended by a bug."""
        last = self.last
        return self.service is not None and self.tries > 0 and (last is None or last.kind != "bug")

    def _after_failure(
        self, *, now: datetime, complete_by: datetime, rng: random.Random
    ) -> Retry | ReplyError | GiveUp:
        last = self.last
        assert last is not None  # set by failed()
        self.retries += 1
        delay = next_retry(
            self.policy,
            self.retries,
            rng,
            now=now,
            complete_by=complete_by,
            retry_after=last.retry_after,
        )
        if delay is None:
            if last.kind == "bug":
                return ReplyError(error=last.error, bug=True, tries=self.tries, answered=False)
            return GiveUp(error=last.error, tries=self.tries)
        self.phase = Phase.BACKOFF
        return Retry(delay)
