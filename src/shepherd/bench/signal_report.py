"""The signal workload's table and target: delivery latency, the sender in another process."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from shepherd.bench.signal_latency import SignalResult

__all__ = ["TARGET_P50_MS", "render_signal", "targets"]

#: Signal sent (another process) to the waiting workflow running on, p50, at most.
TARGET_P50_MS = 10.0


def targets(r: SignalResult) -> list[dict[str, Any]]:
    """The issue's target: p50 <= 10 ms from the signal sent to the workflow resumed, none lost."""
    return [
        {
            "workload": "signal",
            "target": f"signal delivery p50 <= {TARGET_P50_MS:g} ms (sender in another "
            "process), 0 lost",
            "measured": f"p50 {r.latency_p50_ms:.2f} ms, p99 {r.latency_p99_ms:.2f} ms, "
            f"{r.tasks_lost} lost",
            "holds": r.latency_p50_ms <= TARGET_P50_MS and r.tasks_lost == 0,
            "margin": f"{TARGET_P50_MS / r.latency_p50_ms:.1f}x" if r.latency_p50_ms else "-",
        }
    ]


def render_signal(r: SignalResult, console: Console) -> None:
    """The signal workload's table."""
    table = Table(
        title=f"signal: {r.n:,} waits (ctx.wait_for), one at a time, each signalled by a "
        "sender process (app.signal) once it waits"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in (
        ("delivered", f"{r.delivered:,}"),
        (
            "sent -> resumed p50 / p99 / max, ms",
            f"{r.latency_p50_ms:.2f} / {r.latency_p99_ms:.2f} / {r.latency_max_ms:.2f}",
        ),
        ("lost", str(r.tasks_lost)),
    ):
        table.add_row(name, value)
    console.print(table)
