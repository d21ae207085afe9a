"""The sleepers workload's table and targets: an idle worker's CPU while tasks sleep, their lateness."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from shepherd.bench.sleepers import SleepersResult

__all__ = ["TARGET_IDLE_CPU", "TARGET_LATENESS_P99_S", "render_sleepers", "targets"]

#: The idle worker's CPU while the tasks sleep, a fraction of one core, at most.
TARGET_IDLE_CPU = 0.01
#: How late after its due time a task runs on, p99, at most.
TARGET_LATENESS_P99_S = 1.0


def _cpu(r: SleepersResult) -> str:
    if r.idle_cpu_while_asleep is None:
        return "not measured (the lead left under 1 s after every task was asleep)"
    return f"{r.idle_cpu_while_asleep:.2%} over {r.idle_measured_s:g} s"


def targets(r: SleepersResult) -> list[dict[str, Any]]:
    """The issue's two targets: idle CPU <= 1 % while asleep, woken within 1 s (p99), none lost."""
    cpu = r.idle_cpu_while_asleep
    return [
        {
            "workload": "sleepers",
            "target": f"idle worker's CPU <= {TARGET_IDLE_CPU:.0%} of a core while "
            f"{r.n:,} tasks sleep",
            "measured": _cpu(r),
            "holds": cpu is not None and cpu <= TARGET_IDLE_CPU,
            "margin": f"{TARGET_IDLE_CPU / cpu:.1f}x" if cpu else "-",
        },
        {
            "workload": "sleepers",
            "target": f"woken within {TARGET_LATENESS_P99_S:g} s of their time (p99), 0 lost",
            "measured": f"p99 {r.lateness_p99_s:.3f} s, {r.tasks_lost} lost",
            "holds": r.lateness_p99_s <= TARGET_LATENESS_P99_S and r.tasks_lost == 0,
            "margin": f"{TARGET_LATENESS_P99_S - r.lateness_p99_s:+.2f}s",
        },
    ]


def render_sleepers(r: SleepersResult, console: Console) -> None:
    """The sleepers' table."""
    table = Table(
        title=f"sleepers: {r.n:,} tasks asleep at once (ctx.sleep_until), due over "
        f"{r.spread_s:g} s from {r.lead_s:g} s after the submit, every role in this process"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in (
        ("tasks", f"{r.n:,}"),
        ("all asleep after the submits, s", f"{r.all_asleep_after_s:.2f}"),
        ("idle CPU while asleep (one core)", _cpu(r)),
        ("woken", f"{r.woken:,}"),
        (
            "lateness p50 / p99 / max, s",
            f"{r.lateness_p50_s:.3f} / {r.lateness_p99_s:.3f} / {r.lateness_max_s:.3f}",
        ),
        ("tasks lost", str(r.tasks_lost)),
    ):
        table.add_row(name, value)
    console.print(table)
