"""Exclusive owners: a call's owning key, and which keys a process should take or hand back.

An exclusive agent's requests carry an owning key (the seed's event type): at
any moment at most one process owns a key, through a lease with an epoch kept
in the store. This module decides, from a snapshot of the leases, what one
process asks the store for; the store's fenced writes make the decision safe
when two processes act on the same snapshot (the second one's take is refused).

Keys spread over the live processes: none should own more than its fair share,
`ceil(keys / processes)`. A process prefers the keys it ranks highest by
rendezvous hashing, so processes racing for free keys mostly ask for different
ones, and a key tends to return to the same process. An answer may leave the
key's owner state as it is (`NO_STATE`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from shepherd.core.limits import KEY_BYTES, too_long
from shepherd.core.records import JsonValue

__all__ = [
    "NO_STATE",
    "KeyLease",
    "NoState",
    "OwnershipPlan",
    "TakenKey",
    "fair_share",
    "owner_key_of",
    "plan_ownership",
    "rank",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyLease:
    """One key's lease, as the store keeps it."""

    key: str
    owner: str
    #: Bumped by every take: a write carrying an older epoch is a stale owner's.
    epoch: int
    lease_until: datetime

    def live(self, now: datetime) -> bool:
        """Whether the lease still holds at `now`."""
        return now < self.lease_until


@dataclass(frozen=True, slots=True, kw_only=True)
class TakenKey:
    """A key an owner took (or kept): its lease, and the durable owner state last set.

    A new owner reads `state` when it takes the key over: what the previous
    owner committed with its last acknowledgements (None if none was set).
    """

    lease: KeyLease
    state: JsonValue = None


@dataclass(frozen=True, slots=True)
class OwnershipPlan:
    """What one process should ask the store for, keys in the order to ask.

    Attributes:
        take: Free keys (never leased, or their lease expired) to take.
        release: Keys it owns beyond its fair share, to hand back once idle.
    """

    take: tuple[str, ...] = ()
    release: tuple[str, ...] = ()


def fair_share(keys: int, processes: int) -> int:
    """The most keys one process should own: `ceil(keys / processes)` (0 without keys)."""
    if keys <= 0:
        return 0
    return math.ceil(keys / max(processes, 1))


def rank(key: str, process: str) -> bytes:
    """Rendezvous weight of `process` for `key`: the highest weight is its preferred owner."""
    return hashlib.blake2b(f"{key}\x00{process}".encode(), digest_size=8).digest()


def plan_ownership(
    *,
    me: str,
    now: datetime,
    processes: Collection[str],
    leases: Mapping[str, KeyLease],
    keys: Collection[str],
) -> OwnershipPlan:
    """Which keys `me` should take and which it should hand back.

    Args:
        me: This process.
        now: The store's instant of the snapshot.
        processes: The live processes that run the agent (`me` is counted
            whether or not it is listed).
        leases: The keys' leases, by key (an expired one is free).
        keys: Keys with requests waiting; with the leased keys, the keys to share.

    Returns:
        Free keys to take, `me`'s preferred first, up to its fair share; and,
        when it owns more than its share, the keys it ranks lowest to hand back.
    """
    every = set(keys) | set(leases)
    share = fair_share(len(every), len(set(processes) | {me}))
    mine = sorted(k for k, lease in leases.items() if lease.owner == me and lease.live(now))
    free = [k for k in every if k not in leases or not leases[k].live(now)]
    free.sort(key=lambda k: rank(k, me), reverse=True)
    room = max(share - len(mine), 0)
    take = tuple(free[:room])
    release: tuple[str, ...] = ()
    if len(mine) > share:
        mine.sort(key=lambda k: rank(k, me))
        release = tuple(mine[: len(mine) - share])
    return OwnershipPlan(take=take, release=release)


class NoState:
    """The type of `NO_STATE`: an answer that leaves the key's owner state as it is."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_STATE"


#: Passed as `state` to `answer_owned`: the owner state is not changed.
NO_STATE = NoState()


def owner_key_of(
    exclusive_by: str | Callable[[JsonValue], object], payload: JsonValue
) -> str | ValueError:
    """The owning key of a call to an exclusive agent, or why there is none.

    `exclusive_by` names a payload field (the payload must be an object whose
    field holds a non-empty string) or is a function of the payload returning
    a non-empty string of at most KEY_BYTES of UTF-8 (the store indexes it). A
    function that raises is reported, not propagated.
    """
    if isinstance(exclusive_by, str):
        if not isinstance(payload, dict):
            return ValueError(
                f"the payload must be a JSON object with a {exclusive_by!r} field, "
                f"not {type(payload).__name__}"
            )
        if exclusive_by not in payload:
            return ValueError(f"the payload has no {exclusive_by!r} field")
        key: object = payload[exclusive_by]
        source = f"the payload's {exclusive_by!r} field"
    else:
        try:
            key = exclusive_by(payload)
        except Exception as exc:
            return ValueError(f"its key function raised {type(exc).__name__}: {exc}")
        source = "its key function"
    if not isinstance(key, str) or not key:
        return ValueError(f"{source} must give a non-empty string, not {key!r}")
    if (problem := too_long(f"the owning key ({source})", key, KEY_BYTES)) is not None:
        return ValueError(problem)
    return key
