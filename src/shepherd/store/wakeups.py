"""Wake-ups across processes: the rung local channels, as announcements another process reads.

A committed batch rings local `Signals` channels; every backend tells other
processes which, as (channel, payload) announcements: PostgreSQL NOTIFYs them,
SQLite sends them as datagrams. The receiver rings the same local channels.
"""

from __future__ import annotations

from collections.abc import Iterable

from shepherd.store import signals as ch

__all__ = ["CHANNELS", "TASK_CHANNEL", "announced", "local_channels", "notifications"]

#: Local channel -> announced channel.
CHANNELS = {
    ch.TASKS: "shepherd_tasks",
    ch.REQUESTS: "shepherd_requests",
    ch.REPLIES: "shepherd_replies",
    ch.EVENTS: "shepherd_events",
    ch.BREAKERS: "shepherd_breakers",
    ch.RESOLVER: "shepherd_resolver",
    ch.SLOTS: "shepherd_slots",
    ch.CALLS: "shepherd_calls",
    ch.ANSWERS: "shepherd_answers",
}
#: Carries the ids of tasks that ended (comma-separated), for result waiters.
TASK_CHANNEL = "shepherd_task"

_LOCAL = {announced: local for local, announced in CHANNELS.items()}
_TASK_PREFIX = ch.task_channel("")
# NOTIFY payloads must stay under 8000 bytes.
_NOTIFY_PAYLOAD = 7900


def notifications(
    rings: Iterable[str], *, max_payload: int = _NOTIFY_PAYLOAD
) -> list[tuple[str, str]]:
    """The (channel, payload) announcements of local `rings`: one per channel.

    Task channels are gathered into `shepherd_task` payloads of comma-separated
    ids, as few as `max_payload` (bytes of ASCII ids) allows.
    """
    pairs: list[tuple[str, str]] = []
    task_ids: list[str] = []
    for channel in sorted(rings):
        if channel in CHANNELS:
            pairs.append((CHANNELS[channel], ""))
        elif channel.startswith(_TASK_PREFIX):
            task_ids.append(channel[len(_TASK_PREFIX) :])
    chunk: list[str] = []
    size = 0
    for task_id in task_ids:
        if chunk and size + len(task_id) + 1 > max_payload:
            pairs.append((TASK_CHANNEL, ",".join(chunk)))
            chunk, size = [], 0
        chunk.append(task_id)
        size += len(task_id) + 1
    if chunk:
        pairs.append((TASK_CHANNEL, ",".join(chunk)))
    return pairs


def local_channels(channel: str, payload: str) -> list[str]:
    """The local channels an announcement on `channel` with `payload` rings."""
    if channel == TASK_CHANNEL:
        return [ch.task_channel(task_id) for task_id in payload.split(",") if task_id]
    local = _LOCAL.get(channel)
    return [] if local is None else [local]


def announced(channel: str) -> str | None:
    """The announced channel whose announcements ring local `channel` (None: none do)."""
    name = CHANNELS.get(channel)
    if name is None and channel.startswith(_TASK_PREFIX):
        return TASK_CHANNEL
    return name
