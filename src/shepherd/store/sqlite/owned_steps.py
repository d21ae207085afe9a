"""Steps through an exclusive agent's owner on SQLite: a key's work taken, its replies written.

Both run under the transaction's write lock. A reply is written by
`ReplyAndAck`'s own handler, inside the owner's fenced transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import ReplyOwned, TakeKeyWork
from shepherd.store.sql import calls, owned_steps
from shepherd.store.sqlite import queues
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

# The handlers are filed in WRITES, not imported by name.
__all__: list[str] = []


@WRITES.handles(TakeKeyWork)
def take_key_work(batch: SqliteBatch, ops: Sequence[TakeKeyWork]) -> list[object]:
    """Each owner's next steps of its key, else its next calls (fenced by the key's lease)."""
    return batch.run(owned_steps.take_key_work(batch, ops))


@WRITES.handles(ReplyOwned)
def reply_owned(batch: SqliteBatch, ops: Sequence[ReplyOwned]) -> list[object]:
    """Each owner's state and step replies, where it still owns the key."""
    owned = batch.run(calls.answer_owned(batch, [op.answer for op in ops]))
    out: list[object] = []
    for op, held in zip(ops, owned, strict=True):
        if held is not True:
            out.append(held if isinstance(held, Exception) else (False, []))
        else:
            out.append((True, queues.reply(batch, op.replies) if op.replies else []))
    return out
