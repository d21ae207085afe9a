"""A circuit breaker per remote service, as plain values.

The breaker is a record (`Breaker`) and a few pure functions that return the next
record: `allow` before a call, `record_success` or `record_failure` after it. The
record holds only strings, integers and instants, so it can be kept in the state
store and shared by every agent process; `version` grows by one on every change, for
compare-and-set.

States:
    closed: Calls go through. Failures are counted, both in a row and over a fixed
        window of `policy.window` seconds; the breaker opens when `failure_threshold`
        failures come in a row, or (with `failure_ratio`) when at least `min_calls`
        calls in the window have failed at that ratio or more.
    open: Calls wait until `opened_at + cool_down`; then one probe is allowed and the
        breaker goes half-open.
    half_open: One probe is in flight. Its success closes the breaker, its failure
        opens it again. A probe that never reports is given up after `cool_down`, and
        a new probe is allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue


class BreakerState(StrEnum):
    """The state of a circuit breaker."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerPolicy:
    """When a breaker opens, and how long it stays open.

    Attributes:
        failure_threshold: Consecutive failures that open the breaker; at least 1.
        failure_ratio: If set, the breaker also opens when the failed share of the
            calls in the current window reaches it; above 0, at most 1.
        window: Length of a counting window, in seconds; above 0. Windows are fixed:
            the counts restart once a window is `window` seconds old.
        min_calls: Calls in the window before `failure_ratio` applies; at least 1.
        cool_down: Seconds the breaker stays open before a probe, and seconds a probe
            may stay unreported before another is allowed; above 0.

    Raises:
        ValueError: A field is out of range; the message names the field.
    """

    failure_threshold: int = 5
    failure_ratio: float | None = None
    window: float = 30.0
    min_calls: int = 10
    cool_down: float = 10.0

    def __post_init__(self) -> None:
        _check_int("failure_threshold", self.failure_threshold, minimum=1)
        if self.failure_ratio is not None and not (
            isinstance(self.failure_ratio, int | float)
            and not isinstance(self.failure_ratio, bool)
            and 0 < self.failure_ratio <= 1
        ):
            raise ValueError(
                f"failure_ratio must be None or a number above 0 and at most 1, "
                f"got {self.failure_ratio!r}"
            )
        if not (math.isfinite(self.window) and self.window > 0):
            raise ValueError(f"window must be a finite number > 0, got {self.window!r}")
        _check_int("min_calls", self.min_calls, minimum=1)
        if not (math.isfinite(self.cool_down) and self.cool_down > 0):
            raise ValueError(f"cool_down must be a finite number > 0, got {self.cool_down!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Breaker:
    """The circuit breaker of one remote service.

    Attributes:
        service: The remote service's name; not empty.
        state: Closed, open or half-open.
        consecutive_failures: Failures in a row since the last success.
        window_started_at: Start of the current counting window, or None before
            the first report.
        window_calls: Calls reported in the current window.
        window_failures: Failures reported in the current window.
        opened_at: When the breaker last opened; set while open or half-open.
        probe_started_at: When the probe in flight was allowed; set while half-open.
        version: Bumped by one on every change; at least 0.

    The counters are kept when the breaker opens (they tell why) and reset when it
    closes.

    Raises:
        ValueError: A field is out of range or inconsistent with `state`; the message
            names the field.
    """

    service: str
    state: BreakerState = BreakerState.CLOSED
    consecutive_failures: int = 0
    window_started_at: datetime | None = None
    window_calls: int = 0
    window_failures: int = 0
    opened_at: datetime | None = None
    probe_started_at: datetime | None = None
    version: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.service, str) or not self.service:
            raise ValueError(f"service must be a non-empty string, got {self.service!r}")
        if not isinstance(self.state, BreakerState):
            raise ValueError(f"state must be a BreakerState, got {self.state!r}")
        _check_int("consecutive_failures", self.consecutive_failures, minimum=0)
        _check_int("window_calls", self.window_calls, minimum=0)
        _check_int("window_failures", self.window_failures, minimum=0)
        if self.window_failures > self.window_calls:
            raise ValueError(
                f"window_failures must be <= window_calls ({self.window_calls!r}), "
                f"got {self.window_failures!r}"
            )
        _check_int("version", self.version, minimum=0)
        if self.state is not BreakerState.CLOSED and self.opened_at is None:
            raise ValueError(f"opened_at must be set when the breaker is {self.state}")
        if (self.state is BreakerState.HALF_OPEN) != (self.probe_started_at is not None):
            raise ValueError(
                "probe_started_at must be set exactly when the breaker is half_open, "
                f"got {self.probe_started_at!r} while {self.state}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """Make the call: the breaker is closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """Make one call to test the service: the breaker is half-open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    """Do not call before `until`: the breaker is open, or a probe is in flight."""

    until: datetime


Decision = Call | Probe | Wait


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakerEvent:
    """One recorded change of a breaker: its state before and after, and why.

    Attributes:
        id: Grows with every event, across services.
        service: The remote service's name.
        from_state: The state before the change.
        to_state: The state after it (the same as `from_state` when a probe that
            never reported is replaced by a new one).
        detail: Why, and the counts at that moment (see `change_detail`).
        at: When the change was written (the store's clock).
    """

    id: int
    service: str
    from_state: BreakerState
    to_state: BreakerState
    detail: JsonValue
    at: datetime


def allow(b: Breaker, policy: BreakerPolicy, *, now: datetime) -> tuple[Breaker, Decision]:
    """Decide whether a call to the service may be made now.

    Args:
        b: The breaker.
        policy: The breaker policy.
        now: The current instant (aware UTC).

    Returns:
        The next breaker, and the decision. The breaker changes only when a probe is
        allowed (it goes, or stays, half-open with `probe_started_at=now`).
    """
    cool_down = timedelta(seconds=policy.cool_down)
    if b.state is BreakerState.CLOSED:
        return b, Call()
    if b.state is BreakerState.OPEN:
        assert b.opened_at is not None  # checked by Breaker
        until = b.opened_at + cool_down
    else:
        assert b.probe_started_at is not None  # checked by Breaker
        until = b.probe_started_at + cool_down
    if now < until:
        return b, Wait(until=until)
    return _change(b, state=BreakerState.HALF_OPEN, probe_started_at=now), Probe()


def record_success(b: Breaker, policy: BreakerPolicy, *, now: datetime) -> Breaker:
    """Return the breaker after a call succeeded.

    Half-open: the probe succeeded, so the breaker closes with its counters reset.
    Closed: the failures in a row restart, and the call is counted in the window.
    Open: a late report of a call allowed before the breaker opened; ignored.

    Args:
        b: The breaker.
        policy: The breaker policy.
        now: The current instant (aware UTC).
    """
    if b.state is BreakerState.HALF_OPEN:
        return _change(
            b,
            state=BreakerState.CLOSED,
            consecutive_failures=0,
            window_started_at=None,
            window_calls=0,
            window_failures=0,
            opened_at=None,
            probe_started_at=None,
        )
    if b.state is BreakerState.OPEN:
        return b
    started_at, calls, failures = _window(b, policy, now=now)
    return _change(
        b,
        consecutive_failures=0,
        window_started_at=started_at,
        window_calls=calls + 1,
        window_failures=failures,
    )


def record_failure(b: Breaker, policy: BreakerPolicy, *, now: datetime) -> Breaker:
    """Return the breaker after a call failed.

    Closed: the failure is counted; the breaker opens (`opened_at=now`) when the
    failures in a row reach `failure_threshold`, or when `failure_ratio` is set, the
    window holds at least `min_calls` calls and the failed share reaches the ratio.
    Half-open: the probe failed, so the breaker opens again (`opened_at=now`).
    Open: a late report of a call allowed before the breaker opened; ignored.

    Args:
        b: The breaker.
        policy: The breaker policy.
        now: The current instant (aware UTC).
    """
    if b.state is BreakerState.HALF_OPEN:
        return _change(b, state=BreakerState.OPEN, opened_at=now, probe_started_at=None)
    if b.state is BreakerState.OPEN:
        return b
    started_at, calls, failures = _window(b, policy, now=now)
    calls, failures, consecutive = calls + 1, failures + 1, b.consecutive_failures + 1
    counted = _change(
        b,
        consecutive_failures=consecutive,
        window_started_at=started_at,
        window_calls=calls,
        window_failures=failures,
    )
    if should_open(
        policy, consecutive_failures=consecutive, window_calls=calls, window_failures=failures
    ):
        return replace(counted, state=BreakerState.OPEN, opened_at=now)
    return counted


def should_open(
    policy: BreakerPolicy, *, consecutive_failures: int, window_calls: int, window_failures: int
) -> bool:
    """Whether a closed breaker with these counts opens under `policy`."""
    if consecutive_failures >= policy.failure_threshold:
        return True
    return (
        policy.failure_ratio is not None
        and window_calls >= policy.min_calls
        and window_failures / window_calls >= policy.failure_ratio
    )


def transition(old: Breaker, new: Breaker) -> tuple[BreakerState, BreakerState] | None:
    """Return the state change from `old` to `new`, or None if the state is the same.

    Raises:
        ValueError: The breakers are of different services.
    """
    if old.service != new.service:
        raise ValueError(f"service differs: {old.service!r} and {new.service!r}")
    if old.state is new.state:
        return None
    return old.state, new.state


def change_detail(old: Breaker, new: Breaker, policy: BreakerPolicy) -> dict[str, JsonValue] | None:
    """The reason and counts to record for the change from `old` to `new`, or None.

    A change worth recording is a change of state, or a new probe replacing one
    that never reported. The reason is one of `consecutive_failures` or
    `failure_ratio` (the breaker opened), `cool_down` (a probe was allowed),
    `probe_unreported` (a new probe replaced a silent one), `probe_failed` and
    `probe_succeeded`. The policy's `cool_down` is kept too, so that readers who
    know no policy can tell when the next probe is allowed.
    """
    if old.state is new.state and not (
        new.state is BreakerState.HALF_OPEN and new.probe_started_at != old.probe_started_at
    ):
        return None
    if new.state is BreakerState.OPEN and old.state is BreakerState.CLOSED:
        consecutive = new.consecutive_failures >= policy.failure_threshold
        reason = "consecutive_failures" if consecutive else "failure_ratio"
    elif new.state is BreakerState.OPEN:
        reason = "probe_failed"
    elif new.state is BreakerState.CLOSED:
        reason = "probe_succeeded"
    elif old.state is BreakerState.HALF_OPEN:
        reason = "probe_unreported"
    else:
        reason = "cool_down"
    # Closing resets the counters: the ones that opened the breaker tell more.
    counts = old if new.state is BreakerState.CLOSED else new
    return {
        "reason": reason,
        "consecutive_failures": counts.consecutive_failures,
        "window_calls": counts.window_calls,
        "window_failures": counts.window_failures,
        "cool_down": policy.cool_down,
    }


def _window(b: Breaker, policy: BreakerPolicy, *, now: datetime) -> tuple[datetime, int, int]:
    """Return the window's start, calls and failures at `now`, rolled if it has expired."""
    started_at = b.window_started_at
    if started_at is None or now - started_at >= timedelta(seconds=policy.window):
        return now, 0, 0
    return started_at, b.window_calls, b.window_failures


def _change(b: Breaker, **changes: object) -> Breaker:
    """Return `b` with `changes`, and `version` bumped; or `b` itself if nothing changed."""
    new = replace(b, **changes)  # type: ignore[arg-type]
    if new == b:
        return b
    return replace(new, version=b.version + 1)


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
