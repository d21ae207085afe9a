"""Retry policy of an agent: how often to try a step, and how long to wait between tries.

Delays grow exponentially up to a cap, with full jitter, and never reach past the
step's `complete_by`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random
    from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How an agent retries a transient failure.

    Attributes:
        max_attempts: Total tries, including the first; at least 1.
        initial_delay: Seconds before the second try; at least 0.
        max_delay: Cap on any delay, in seconds; at least `initial_delay`.
        multiplier: Growth factor of the delay per failure; at least 1.
        jitter: Full jitter: the delay is drawn uniformly from 0 to the capped value.

    Raises:
        ValueError: A field is out of range; the message names the field.
    """

    max_attempts: int = 5
    initial_delay: float = 0.05
    max_delay: float = 5.0
    multiplier: float = 2.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ValueError(f"max_attempts must be an integer, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts!r}")
        if not (math.isfinite(self.initial_delay) and self.initial_delay >= 0):
            raise ValueError(
                f"initial_delay must be a finite number >= 0, got {self.initial_delay!r}"
            )
        if not (math.isfinite(self.max_delay) and self.max_delay >= self.initial_delay):
            raise ValueError(
                f"max_delay must be a finite number >= initial_delay ({self.initial_delay!r}), "
                f"got {self.max_delay!r}"
            )
        if not (math.isfinite(self.multiplier) and self.multiplier >= 1):
            raise ValueError(f"multiplier must be a finite number >= 1, got {self.multiplier!r}")
        if not isinstance(self.jitter, bool):
            raise ValueError(f"jitter must be true or false, got {self.jitter!r}")

    def to_json(self) -> dict[str, int | float | bool]:
        """The policy as a JSON object (it travels with a request to another process)."""
        return {
            "max_attempts": self.max_attempts,
            "initial_delay": self.initial_delay,
            "max_delay": self.max_delay,
            "multiplier": self.multiplier,
            "jitter": self.jitter,
        }

    @classmethod
    def from_json(cls, value: object) -> RetryPolicy:
        """The policy from `to_json()`'s object.

        Raises:
            ValueError: Not an object of known fields, or a field is out of range.
        """
        if not isinstance(value, dict):
            raise ValueError(f"a retry policy must be a JSON object, got {value!r}")
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown retry policy field(s): {', '.join(map(str, unknown))}")
        numbers = {k: v for k, v in value.items() if k != "jitter"}
        for name, field_value in numbers.items():
            if isinstance(field_value, bool) or not isinstance(field_value, int | float):
                raise ValueError(f"{name} must be a number, got {field_value!r}")
        return cls(**value)


def capped_exponential(initial: float, multiplier: float, cap: float, exponent: int) -> float:
    """Return `min(cap, initial * multiplier ** exponent)` without overflowing.

    Args:
        initial: The value at exponent 0; at least 0.
        multiplier: The growth factor; at least 1.
        cap: The upper bound of the result.
        exponent: At least 0.
    """
    if initial == 0:
        return 0.0
    try:
        raw = initial * multiplier**exponent
    except OverflowError:
        return cap
    return min(cap, raw)


def backoff_delay(policy: RetryPolicy, failures: int, rng: random.Random) -> float:
    """Return the delay, in seconds, before the next try after `failures` failures.

    The delay is `min(max_delay, initial_delay * multiplier ** (failures - 1))`, or a
    uniform draw between 0 and that value when `policy.jitter` is set.

    Args:
        policy: The retry policy.
        failures: Failed tries so far; at least 1.
        rng: The source of jitter.

    Raises:
        ValueError: `failures` is below 1.
    """
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures!r}")
    delay = capped_exponential(
        policy.initial_delay, policy.multiplier, policy.max_delay, failures - 1
    )
    if policy.jitter:
        return rng.uniform(0.0, delay)
    return delay


def next_retry(
    policy: RetryPolicy,
    failures: int,
    rng: random.Random,
    *,
    now: datetime,
    complete_by: datetime | None,
    retry_after: float | None = None,
) -> float | None:
    """Decide whether to try again after `failures` failures, and after how long.

    Args:
        policy: The retry policy.
        failures: Failed tries so far; at least 1.
        rng: The source of jitter.
        now: The current instant (aware UTC).
        complete_by: The step's deadline, or None for no deadline.
        retry_after: A service's Retry-After, in seconds: the delay is at least this.
            It comes from outside, so it never raises: a negative or NaN value is
            ignored, and an infinite one gives up.

    Returns:
        The delay in seconds before the next try, or None to give up: the attempts
        are spent, or the next try would start at or after `complete_by`.

    Raises:
        ValueError: `failures` is below 1.
    """
    if failures >= policy.max_attempts:
        return None
    delay = backoff_delay(policy, failures, rng)
    if retry_after is not None and retry_after > delay:
        delay = retry_after
    if math.isinf(delay):
        return None
    if complete_by is not None and delay >= (complete_by - now).total_seconds():
        return None
    return delay
