"""Steps through an exclusive agent's owner on PostgreSQL: a key's work taken, its replies written.

The owner's fence (`FOR SHARE` on its key's lease) holds until the commit, so
a taker of the expiring lease waits for the replies. A reply is written by
`ReplyAndAck`'s own handler (both its phases), inside that fenced transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import ReplyOwned, TakeKeyWork
from shepherd.store.postgres import queues
from shepherd.store.postgres.batch import WRITES
from shepherd.store.sql import calls, owned_steps

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch

# The handlers are filed in WRITES, not imported by name.
__all__: list[str] = []


@WRITES.handles(TakeKeyWork)
async def take_key_work(batch: PostgresBatch, ops: Sequence[TakeKeyWork]) -> list[object]:
    """Each owner's next steps of its key, else its next calls (fenced by the key's lease)."""
    return await batch.run(owned_steps.take_key_work(batch, ops))


@WRITES.handles(ReplyOwned)
async def reply_owned(batch: PostgresBatch, ops: Sequence[ReplyOwned]) -> list[object]:
    """Each owner's state and step replies, where it still owns the key."""
    owned = await batch.run(calls.answer_owned(batch, [op.answer for op in ops]))
    out: list[object] = []
    for op, held in zip(ops, owned, strict=True):
        if held is not True:
            out.append(held if isinstance(held, Exception) else (False, []))
        elif op.replies:
            out.append((True, await (await queues.reply(batch, op.replies))()))
        else:
            out.append((True, []))
    return out
