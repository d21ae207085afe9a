"""Exclusive owners: leases on an exclusive agent's keys, with epochs, and each key's calls.

A key (the seed's event type) is owned by at most one process at any moment.
Every lease carries an epoch, bumped whenever the key changes hands (or its
owner takes it back after letting it expire), so that a write carrying an
older epoch is recognisably a stale owner's: fenced owner writes change
nothing for it. `owner` here is always a key's exclusive owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY
from datetime import datetime

from shepherd.core.calls import NO_STATE, NoState
from shepherd.core.ownership import KeyLease, TakenKey
from shepherd.core.records import CallRequest, JsonValue, Reply, Request
from shepherd.store.ops.base import Read, Runs, Write, method, operation
from shepherd.store.ops.queues import ReplyAndAck

__all__ = [
    "AnswerAndTake",
    "AnswerOwned",
    "KeyBacklogs",
    "ListKeyLeases",
    "Owners",
    "ReleaseKeys",
    "RenewKeys",
    "ReplyOwned",
    "TakeKeyCalls",
    "TakeKeyWork",
    "TakeKeys",
    "WaitingKeys",
]


@operation
class TakeKeys(Write[list[TakenKey]]):
    """Take (or renew) keys of an exclusive agent for `owner`, each for `lease` seconds.

    At most one owner holds a key's lease at any moment. A free key (never
    leased, handed back, or its lease expired) is taken with its epoch bumped,
    and comes with the durable owner state its last owner set; a key `owner`
    holds live is renewed with its epoch kept; a key another owner holds live
    is not granted. Returns the keys granted, in the order asked.
    """

    agent: str
    keys: Sequence[str]
    _: KW_ONLY
    owner: str
    lease: float


@operation
class RenewKeys(Write[list[KeyLease]]):
    """Move every live key lease of `owner` `lease` seconds ahead; returns those renewed.

    A key of `owner` missing from it expired: another owner may hold it now.
    """

    _: KW_ONLY
    owner: str
    lease: float


@operation
class ReleaseKeys(Write[int]):
    """Hand keys of `agent` back (their epoch and state stay); how many `owner` still held."""

    agent: str
    keys: Sequence[str]
    _: KW_ONLY
    owner: str


@operation
class ListKeyLeases(Read[list[KeyLease]]):
    """The owned keys of `agent`, by key (expired leases too, until taken again)."""

    agent: str


@operation
class KeyBacklogs(Read[dict[str, tuple[int, datetime]]]):
    """Of each key of `agent` with work waiting: how many, and when the oldest was sent.

    Work waiting: unanswered, unexpired calls, and step requests of the key no
    handling has taken yet (unexpired). One read for all of a process's keys:
    what its owners look at on every wake-up, to know whose batch is due.
    """

    agent: str


@operation
class WaitingKeys(Read[list[str]]):
    """The owning keys of `agent`'s unanswered calls and queued step requests, sorted.

    The keys to share out among the processes that serve the agent.
    """

    agent: str


@operation
class TakeKeyCalls(Write[tuple[list[CallRequest], list[CallRequest]]]):
    """Take the next `limit` calls of one key for its owner, in the order they were sent.

    Fenced: ([], []) unless `owner` holds the key's live lease at `epoch`. A
    call taken before, by this owner or an earlier one, is taken again (its
    handlings counted); a call out of handlings is answered with an error and
    returned as given up, as `take_calls` does. Returns (taken, given up).
    """

    agent: str
    key: str
    _: KW_ONLY
    owner: str
    epoch: int
    limit: int


@operation
class AnswerOwned(Write[bool]):
    """Answer calls of one key and, if `set_state`, set its owner state, in one transaction.

    `answers` are (call_id, attempt, ok, body); each is written where its call
    is unanswered and `attempt` is its latest handling. Fenced: False, and
    nothing written, unless `owner` holds the key's live lease at `epoch`, so
    a stale owner's answers and state never land.

    Raises:
        PayloadError: `state` is not JSON or is too large (nothing written).
    """

    agent: str
    key: str
    _: KW_ONLY
    owner: str
    epoch: int
    #: (call_id, attempt, ok, body) of each answer.
    answers: Sequence[tuple[str, int, bool, JsonValue]]
    set_state: bool = False
    state: JsonValue = None


@operation
class AnswerAndTake(
    Write[tuple[bool, list[CallRequest], list[CallRequest], tuple[int, datetime | None]]]
):
    """`answer`, then, in the same transaction, the key's next batch if it is due.

    Due: `max_items` calls wait, or the oldest has waited `max_delay` seconds;
    taken as `TakeKeyCalls` takes. Returns (owned, taken, given up, backlog):
    one commit per flush for a busy key instead of two. The backlog is the
    key's unanswered calls as read before the take (how many, and when the
    oldest was sent; (0, None) for a stale owner), so that an owner that took
    nothing waits for its next batch without reading again.
    """

    answer: AnswerOwned
    _: KW_ONLY
    max_items: int
    max_delay: float


@operation
class TakeKeyWork(Write[tuple[list[Request], list[CallRequest], list[CallRequest]]]):
    """Take the next work of one key for its owner: its steps first, else its calls.

    Fenced: ([], [], []) unless `owner` holds the key's live lease at `epoch`.
    Steps: up to `limit` unexpired requests of steps queued for the key, in the
    order they were queued, but those in `skip` (the owner's handlings of them
    ended without a reply: the supervisor sees their complete_by pass), leased
    to `worker` (the owner process's agent worker name) until their
    complete_by; a request taken before (by an earlier owner, or by this one
    before its reply was fenced off) is taken again. A step is never taken
    before one of its key queued earlier (`start_step` queues a key's requests
    one transaction at a time). Only when no step is taken, the key's calls,
    as `TakeKeyCalls` takes them. Returns (steps, calls taken, calls given up).
    """

    agent: str
    key: str
    _: KW_ONLY
    owner: str
    epoch: int
    worker: str
    limit: int
    #: The key's requests not to take, each as (id, task_id, seq, attempt): SQLite
    #: gives a deleted request's id to the next one queued.
    skip: Sequence[tuple[int, str, int, int]] = ()


@operation
class ReplyOwned(Write[tuple[bool, list[bool | Reply]]]):
    """The replies to steps one key's owner handled, with its owner state, in one transaction.

    Fenced: (False, []), and nothing written, unless the owner holds the key's
    live lease at its epoch (`answer.owner`, `answer.epoch`; `answer.answers`
    must be empty). Then the owner state is set as `AnswerOwned` sets it and
    each of `replies` is written exactly as `ReplyAndAck` writes it (the same
    fencing by the request's lease, the task's epoch and the step's attempt,
    and the same recording for a scheduler of the worker's own process);
    returns (True, each reply's `ReplyAndAck` outcome).

    Raises:
        PayloadError: The owner state is not JSON or is too large (nothing written).
    """

    answer: AnswerOwned
    replies: Sequence[ReplyAndAck]


class Owners(Runs):
    """The store's methods for exclusive owners' keys."""

    take_keys = method(TakeKeys)
    renew_keys = method(RenewKeys)
    release_keys = method(ReleaseKeys)
    list_key_leases = method(ListKeyLeases)
    key_backlogs = method(KeyBacklogs)
    waiting_keys = method(WaitingKeys)
    take_key_calls = method(TakeKeyCalls)
    take_key_work = method(TakeKeyWork)

    async def answer_owned(
        self,
        agent: str,
        key: str,
        *,
        owner: str,
        epoch: int,
        answers: Sequence[tuple[str, int, bool, JsonValue]],
        state: JsonValue | NoState = NO_STATE,
    ) -> bool:
        """`AnswerOwned`; `state`, unless `NO_STATE`, becomes the key's owner state."""
        return await self.write(self._answered(agent, key, owner, epoch, answers, state))

    async def answer_and_take(
        self,
        agent: str,
        key: str,
        *,
        owner: str,
        epoch: int,
        answers: Sequence[tuple[str, int, bool, JsonValue]],
        state: JsonValue | NoState = NO_STATE,
        max_items: int,
        max_delay: float,
    ) -> tuple[bool, list[CallRequest], list[CallRequest], tuple[int, datetime | None]]:
        """`AnswerAndTake` of `answer_owned`'s answers and state."""
        answer = self._answered(agent, key, owner, epoch, answers, state)
        return await self.write(AnswerAndTake(answer, max_items=max_items, max_delay=max_delay))

    async def reply_owned(
        self,
        agent: str,
        key: str,
        *,
        owner: str,
        epoch: int,
        replies: Sequence[ReplyAndAck],
        state: JsonValue | NoState = NO_STATE,
    ) -> tuple[bool, list[bool | Reply]]:
        """`ReplyOwned` of `replies`; `state`, unless `NO_STATE`, becomes the key's owner state."""
        answer = self._answered(agent, key, owner, epoch, (), state)
        return await self.write(ReplyOwned(answer, tuple(replies)))

    @staticmethod
    def _answered(
        agent: str,
        key: str,
        owner: str,
        epoch: int,
        answers: Sequence[tuple[str, int, bool, JsonValue]],
        state: JsonValue | NoState,
    ) -> AnswerOwned:
        """The operation that answers calls of one key and sets (or keeps) its owner state."""
        return AnswerOwned(
            agent,
            key,
            owner=owner,
            epoch=epoch,
            answers=tuple(answers),
            set_state=not isinstance(state, NoState),
            state=None if isinstance(state, NoState) else state,
        )
