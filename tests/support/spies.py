"""Spies on an App's store: what its roles wrote, seen from the test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shepherd import App


def spy_on_replies(app: App) -> list[tuple[int, bool]]:
    """(attempt, whether it was written) of every reply the app's agent workers send.

    A reply counts as written when its request was still the worker's: queued
    for its scheduler, or recorded on its step at once (alone, or with its
    workflow's next write: `reply_then`).
    """
    replies: list[tuple[int, bool]] = []
    reply_and_ack = app.store.reply_and_ack
    reply_then = app.store.reply_then

    async def spy(request: Any, **kwargs: Any) -> Any:
        written = await reply_and_ack(request, **kwargs)
        replies.append((request.attempt, bool(written)))
        return written

    async def spy_then(ops: Any, **kwargs: Any) -> Any:
        went = await reply_then(ops, **kwargs)
        for op, written in zip(ops, went.replies, strict=True):
            replies.append((op.request.attempt, bool(written)))
        return went

    app.store.reply_and_ack = spy
    app.store.reply_then = spy_then  # type: ignore[assignment]
    return replies
