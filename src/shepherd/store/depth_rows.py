"""Queue depths from the two backends' counts: one `QueueDepth` per agent, by name."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shepherd.core.records import QueueDepth

__all__ = ["queue_depths"]


def queue_depths(
    requests: Iterable[Sequence[object]], calls: Iterable[Sequence[object]]
) -> list[QueueDepth]:
    """Rows (agent, waiting, taken) of requests and of calls -> the depths, by agent name."""
    counts: dict[str, list[int]] = {}
    for offset, rows in ((0, requests), (2, calls)):
        for agent, waiting, taken in rows:
            found = counts.setdefault(str(agent), [0, 0, 0, 0])
            found[offset] += int(str(waiting or 0))
            found[offset + 1] += int(str(taken or 0))
    return [
        QueueDepth(
            agent=agent,
            requests_waiting=n[0],
            requests_taken=n[1],
            calls_waiting=n[2],
            calls_taken=n[3],
        )
        for agent, n in sorted(counts.items())
    ]
