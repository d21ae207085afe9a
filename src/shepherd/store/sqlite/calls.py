"""Durable calls on SQLite: the plans of `store.sql.calls`, and this backend's claim.

Every statement runs under the transaction's write lock (BEGIN IMMEDIATE), so
the waiting calls a take selects are the ones it updates: no other process
takes a call between the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AnswerAndTake,
    AnswerCall,
    AnswerOwned,
    GetAnswers,
    KeyBacklogs,
    PurgeCalls,
    SendCall,
    TakeCalls,
    TakeKeyCalls,
    WaitingKeys,
)
from shepherd.store.sql import calls
from shepherd.store.sql.calls import WAITING_COLUMNS
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import CallAnswer
    from shepherd.store.sqlite.batch import SqliteBatch

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []

# (agents, now, now, limit): the oldest visible calls of the agents, not of a key.
_WAITING = (
    f"SELECT {WAITING_COLUMNS} FROM calls WHERE answered_at IS NULL "
    "AND agent {list} AND owner_key IS NULL AND visible_at <= {now} AND expires_at > {now} "
    "ORDER BY id LIMIT ?"
)


@WRITES.handles(SendCall)
def send_call(batch: SqliteBatch, ops: Sequence[SendCall]) -> list[object]:
    """Store each call whose payload encodes (one statement); the encoding error is its caller's."""
    return batch.run(calls.send_call(batch, ops))


@WRITES.handles(TakeCalls)
def take_calls(batch: SqliteBatch, ops: Sequence[TakeCalls]) -> list[object]:
    """Take each operation's waiting calls; give up those out of handlings."""
    return batch.run(calls.take_calls(batch, ops, waiting=_WAITING))


@WRITES.handles(TakeKeyCalls)
def take_key_calls(batch: SqliteBatch, ops: Sequence[TakeKeyCalls]) -> list[object]:
    """Take the next calls of each operation's key, for its owner at its epoch."""
    return batch.run(calls.take_key_calls(batch, ops))


@WRITES.handles(AnswerOwned)
def answer_owned(batch: SqliteBatch, ops: Sequence[AnswerOwned]) -> list[object]:
    """Each owner's answers and state, where it still owns the key; whether it did."""
    return batch.run(calls.answer_owned(batch, ops))


@WRITES.handles(AnswerAndTake)
def answer_and_take(batch: SqliteBatch, ops: Sequence[AnswerAndTake]) -> list[object]:
    """Each owner's answers and state, then its key's next batch if due (one transaction)."""
    return batch.run(calls.answer_and_take(batch, ops))


@WRITES.handles(AnswerCall)
def answer_call(batch: SqliteBatch, ops: Sequence[AnswerCall]) -> list[object]:
    """Write each answer where its handling is the call's latest; whether it was."""
    return batch.run(calls.answer_call(batch, ops))


@WRITES.handles(PurgeCalls)
def purge_calls(batch: SqliteBatch, ops: Sequence[PurgeCalls]) -> list[object]:
    """Delete expired calls, up to each operation's limit."""
    return batch.run(calls.purge_calls(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(KeyBacklogs)
def key_backlogs(at: Reading, op: KeyBacklogs) -> dict[str, tuple[int, datetime]]:
    """Of each key of one agent with calls waiting: how many, and when the oldest was sent."""
    return at.run(calls.key_backlogs(SQLITE, at.now, op))


@READS.handles(WaitingKeys)
def waiting_keys(at: Reading, op: WaitingKeys) -> list[str]:
    """The owning keys of one agent's unanswered calls."""
    return at.run(calls.waiting_keys(SQLITE, op))


@READS.handles(GetAnswers)
def get_answers(at: Reading, op: GetAnswers) -> dict[str, CallAnswer]:
    """The answers of the answered calls among `op.call_ids`."""
    return at.run(calls.get_answers(SQLITE, op))
