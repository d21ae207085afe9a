"""Durable calls on PostgreSQL: the plans of `store.sql.calls`, and this backend's claim.

Waiting calls are taken with `FOR UPDATE SKIP LOCKED`, so concurrent takers
never get the same call.
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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import calls
from shepherd.store.sql.calls import WAITING_COLUMNS
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import CallAnswer
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []

# (agents, now, now, limit). The ids are locked in an ARRAY(...) sub-select, run
# once (see queues._TAKE).
_WAITING = (
    f"SELECT {WAITING_COLUMNS} FROM calls "
    "WHERE id = ANY(ARRAY(SELECT id FROM calls WHERE answered_at IS NULL "
    "AND agent {list} AND owner_key IS NULL AND visible_at <= {now} "
    "AND expires_at > {now} ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)) ORDER BY id"
)


@WRITES.handles(SendCall)
async def send_call(batch: PostgresBatch, ops: Sequence[SendCall]) -> list[object]:
    """Store each call whose payload encodes; the encoding error is its caller's."""
    return await batch.run(calls.send_call(batch, ops))


@phased(TakeCalls)
async def take_calls(batch: PostgresBatch, ops: Sequence[TakeCalls]) -> Second:
    """Take each operation's waiting calls; give up those out of handlings."""
    return await batch.begin(calls.take_calls(batch, ops, waiting=_WAITING))


@WRITES.handles(TakeKeyCalls)
async def take_key_calls(batch: PostgresBatch, ops: Sequence[TakeKeyCalls]) -> list[object]:
    """Take the next calls of each operation's key, for its owner at its epoch."""
    return await batch.run(calls.take_key_calls(batch, ops))


@WRITES.handles(AnswerOwned)
async def answer_owned(batch: PostgresBatch, ops: Sequence[AnswerOwned]) -> list[object]:
    """Each owner's answers and state, where it still owns the key; whether it did."""
    return await batch.run(calls.answer_owned(batch, ops))


@WRITES.handles(AnswerAndTake)
async def answer_and_take(batch: PostgresBatch, ops: Sequence[AnswerAndTake]) -> list[object]:
    """Each owner's answers and state, then its key's next batch if due (one transaction)."""
    return await batch.run(calls.answer_and_take(batch, ops))


@WRITES.handles(AnswerCall)
async def answer_call(batch: PostgresBatch, ops: Sequence[AnswerCall]) -> list[object]:
    """Write each answer where its handling is the call's latest; whether it was."""
    return await batch.run(calls.answer_call(batch, ops))


@WRITES.handles(PurgeCalls)
async def purge_calls(batch: PostgresBatch, ops: Sequence[PurgeCalls]) -> list[object]:
    """Delete expired calls, up to each operation's limit."""
    return await batch.run(calls.purge_calls(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(KeyBacklogs)
async def key_backlogs(reader: Reader, op: KeyBacklogs) -> dict[str, tuple[int, datetime]]:
    """Of each key of one agent with calls waiting: how many, and when the oldest was sent."""
    return await read(reader, calls.key_backlogs(POSTGRES, reader.clock_param(), op))


@READS.handles(WaitingKeys)
async def waiting_keys(reader: Reader, op: WaitingKeys) -> list[str]:
    """The owning keys of one agent's unanswered calls."""
    return await read(reader, calls.waiting_keys(POSTGRES, op))


@READS.handles(GetAnswers)
async def get_answers(reader: Reader, op: GetAnswers) -> dict[str, CallAnswer]:
    """The answers of the answered calls among `op.call_ids`."""
    return await read(reader, calls.get_answers(POSTGRES, op))
