"""The reply mailbox: where each running step of a scheduler waits for its reply.

One per scheduler, shared by the scheduler and its workflows' contexts, which
never call each other. A step registers the future it waits on under its task
and seq before its request is sent (`expect`); the scheduler posts each reply it
records there (`post`), from its reply loop or from an agent worker of its own
process; a step handed None instead (`recheck`) reads its step from the store again.
"""

from __future__ import annotations

import asyncio
from typing import final

from shepherd.core.records import JsonValue

__all__ = ["Outcome", "ReplyMailbox"]

#: What a waiting step is handed: its reply (ok, body), or None to read the store again.
Outcome = tuple[bool, JsonValue] | None


@final
class ReplyMailbox:
    """The futures the running steps wait on, by (task id, seq)."""

    __slots__ = ("_attempts", "_waiting")

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], asyncio.Future[Outcome]] = {}
        # (lock_epoch, attempt) of the step that waits, by (task id, seq).
        self._attempts: dict[tuple[str, int], tuple[int, int]] = {}

    def __len__(self) -> int:
        """How many steps wait for their reply."""
        return len(self._waiting)

    def expect(
        self, task_id: str, seq: int, *, epoch: int = -1, attempt: int = -1
    ) -> asyncio.Future[Outcome]:
        """A new future for the reply of step `seq`, in place of any earlier one.

        `epoch` and `attempt` name the claim and attempt it waits under: only a
        reply to that request may be handed to it before its commit (`waits_for`).
        """
        future: asyncio.Future[Outcome]
        future = asyncio.get_running_loop().create_future()
        self._waiting[(task_id, seq)] = future
        self._attempts[(task_id, seq)] = (epoch, attempt)
        return future

    def waits_for(self, task_id: str, seq: int, *, epoch: int, attempt: int) -> bool:
        """Whether a step waits for the reply of step `seq` under this epoch and attempt."""
        future = self._waiting.get((task_id, seq))
        return (
            future is not None
            and not future.done()
            and self._attempts.get((task_id, seq)) == (epoch, attempt)
        )

    def waits_with(self, task_id: str, seq: int, future: asyncio.Future[Outcome]) -> bool:
        """Whether `future` is the one registered for the reply of step `seq`."""
        return self._waiting.get((task_id, seq)) is future

    def forget(self, task_id: str, seq: int, future: asyncio.Future[Outcome]) -> None:
        """Drop `future`, unless a later claim of the same task waits on the same seq."""
        if self._waiting.get((task_id, seq)) is future:
            del self._waiting[(task_id, seq)]
            del self._attempts[(task_id, seq)]  # set with it by `expect`

    def post(self, task_id: str, seq: int, reply: tuple[bool, JsonValue]) -> bool:
        """Hand a recorded reply (ok, body) to its step; False when no step waits for it."""
        future = self._waiting.get((task_id, seq))
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True

    def recheck(self, task_id: str, seq: int) -> None:
        """Wake the step waiting for `(task_id, seq)` to read it from the store again."""
        future = self._waiting.get((task_id, seq))
        if future is not None and not future.done():
            future.set_result(None)

    def recheck_all(self) -> None:
        """Wake every waiting step to read its step from the store again."""
        for future in self._waiting.values():
            if not future.done():
                future.set_result(None)
