"""The overview's throughput chart: tasks ended per minute, as bars drawn in SVG on the server.

`chart(buckets)` lays the bars out (pure arithmetic); the template draws them.
Processed tasks stack under failures (`error` or `compensated`) and cancels, so
a red cap on a bar is the failures of that minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

from shepherd.core.overview import ThroughputBucket

__all__ = ["Bar", "Chart", "chart"]

WIDTH = 600
HEIGHT = 120
#: Room at the top for the scale label.
TOP = 14


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One rectangle of the chart: `kind` is `processed`, `errors` or `cancelled`."""

    kind: str
    x: float
    y: float
    width: float
    height: float
    title: str


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """The bars, the highest bucket's total (the scale), and the totals over the window."""

    bars: tuple[Bar, ...]
    peak: int
    processed: int
    errors: int
    cancelled: int
    width: int = WIDTH
    height: int = HEIGHT


def chart(buckets: Sequence[ThroughputBucket]) -> Chart:
    """Lay out one bar per bucket, each stacked processed / errors / cancelled."""
    peak = max((b.processed + b.errors + b.cancelled for b in buckets), default=0)
    slot = WIDTH / max(len(buckets), 1)
    scale = (HEIGHT - TOP) / peak if peak else 0.0
    bars: list[Bar] = []
    for i, bucket in enumerate(buckets):
        base = float(HEIGHT)
        label = bucket.start.strftime("%H:%M")
        for kind, count in (
            ("processed", bucket.processed),
            ("errors", bucket.errors),
            ("cancelled", bucket.cancelled),
        ):
            if not count:
                continue
            height = count * scale
            base -= height
            bars.append(
                Bar(
                    kind=kind,
                    x=round(i * slot + 1, 2),
                    y=round(base, 2),
                    width=round(max(slot - 2, 1), 2),
                    height=round(height, 2),
                    title=f"{label} UTC: {count} {kind}",
                )
            )
    return Chart(
        bars=tuple(bars),
        peak=peak,
        processed=sum(b.processed for b in buckets),
        errors=sum(b.errors for b in buckets),
        cancelled=sum(b.cancelled for b in buckets),
    )
