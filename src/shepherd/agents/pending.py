"""A reply handed to its waiting step before it is committed, and who commits it.

An agent worker whose scheduler runs in its own process offers its reply
(`Recorder.offer`) before writing it: the scheduler hands the body to the
step at once, and the workflow's next write of that task (the start of its
next step, or its finish) takes the reply and records it in the same
transaction (`reply_then`), which writes nothing further if the reply does not
count. A reply no write took in time is withdrawn by its worker and committed
alone, as every reply was before. Taking and withdrawing both happen on the
event loop, so exactly one of them wins; `done` is its commit's outcome.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Reply
    from shepherd.store.ops import AnswerOwned, ReplyAndAck

__all__ = ["HandedBack", "PendingReply"]

_OFFERED, _TAKEN, _WITHDRAWN = "offered", "taken", "withdrawn"


class HandedBack(Exception):
    """The write that took a reply did not go (an earlier reply of its task failed first):
    its worker commits it alone."""


@final
class PendingReply:
    """One reply offered to its step: the write that records it, and what the step was handed.

    Args:
        op: The reply's `reply_and_ack`, as its worker would write it alone.
        body: The body handed to the step: as the store keeps it (JSON read back).
    """

    __slots__ = ("body", "done", "op", "owned", "state")

    def __init__(self, op: ReplyAndAck, body: JsonValue) -> None:
        self.op = op
        self.body = body
        self.state = _OFFERED
        #: A reply made by an exclusive key's owner: its fence and owner state, which
        #: its write checks and sets with it (`reply_then`); None for any other.
        self.owned: AnswerOwned | None = None
        #: The commit's outcome: what `reply_and_ack` returns for it, or its error.
        #: Its worker awaits it (and so reads any failure) until it is settled.
        self.done: asyncio.Future[bool | Reply] = asyncio.get_running_loop().create_future()

    @property
    def task_id(self) -> str:
        return self.op.request.task_id

    @property
    def offered(self) -> bool:
        """Neither taken by a write nor withdrawn yet."""
        return self.state == _OFFERED

    @property
    def taken(self) -> bool:
        """Taken by its workflow's next write, which settles `done`."""
        return self.state == _TAKEN

    def take(self) -> bool:
        """Take it into a write of its task; False if it was withdrawn first."""
        if self.state != _OFFERED:
            return False
        self.state = _TAKEN
        return True

    def withdraw(self) -> bool:
        """Leave it to its worker to commit alone; False if a write took it first."""
        if self.state != _OFFERED:
            return False
        self.state = _WITHDRAWN
        return True

    def hand_back(self) -> None:
        """Taken, but its write will not be made: its worker commits it alone after all."""
        self.state = _WITHDRAWN
        self.settle(HandedBack())

    def settle_from(self, commit: asyncio.Future[bool | Reply]) -> None:
        """Its outcome, from the future of the commit that carried it."""
        if commit.cancelled():
            self.settle(HandedBack())
        else:
            error = commit.exception()
            self.settle(commit.result() if error is None else error)

    def settle(self, outcome: bool | Reply | BaseException) -> None:
        """Its commit's outcome (or error), once; later ones are ignored."""
        if self.done.done():
            return
        if isinstance(outcome, BaseException):
            self.done.set_exception(outcome)
        else:
            self.done.set_result(outcome)
