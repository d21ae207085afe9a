"""Spies on an App's store: what its roles wrote, seen from the test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shepherd import App


def spy_on_replies(app: App) -> list[tuple[int, bool]]:
    """(attempt, whether it was written) of every reply the app's agent workers send.

    A reply counts as written when its request was still the worker's: queued
    for its scheduler, or recorded on its step at once.
    """
    replies: list[tuple[int, bool]] = []
    reply_and_ack = app.store.reply_and_ack

    async def spy(request: Any, **kwargs: Any) -> Any:
        written = await reply_and_ack(request, **kwargs)
        replies.append((request.attempt, bool(written)))
        return written

    app.store.reply_and_ack = spy
    return replies
