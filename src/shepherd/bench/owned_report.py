"""W7's table and targets: steps through an exclusive owner, batched against one step per handling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from shepherd.bench.owned import OwnedResult, OwnedRun

__all__ = ["TARGET_SPEEDUP", "render_owned", "targets"]

#: Batched workflows/s over unbatched workflows/s, the same workload.
TARGET_SPEEDUP = 5.0


_ROWS: tuple[tuple[str, Callable[[OwnedRun], str]], ...] = (
    ("workflows", lambda x: f"{x.n:,}"),
    ("roles start -> all done, s", lambda x: f"{x.seconds:.2f}"),
    ("workflows/s", lambda x: f"{x.workflows_per_s:,.0f}"),
    ("handlings / steps handled", lambda x: f"{x.handlings:,} / {x.items:,}"),
    ("largest batch", lambda x: f"{x.biggest_batch:,}"),
    (
        "store commits per workflow (submission + run)",
        lambda x: f"{x.commits_per_workflow:.3f}",
    ),
    ("tasks lost", lambda x: str(x.tasks_lost)),
    ("lines missing / written twice", lambda x: f"{x.missing_lines} / {x.lines_twice}"),
)


def targets(r: OwnedResult) -> list[dict[str, Any]]:
    """W7's target: the batching owner at least 5x one step per handling, nothing lost."""
    b, u = r.batched, r.unbatched
    kept = r.tasks_lost + b.lines_twice + u.lines_twice == 0
    return [
        {
            "workload": "W7 batched / unbatched",
            "target": f">= {TARGET_SPEEDUP:g}x the unbatched workflows/s, 0 lost, "
            "each line written once",
            "measured": f"{r.speedup:.1f}x ({b.workflows_per_s:,.0f} against "
            f"{u.workflows_per_s:,.0f} workflows/s), {r.tasks_lost} lost, "
            f"{b.lines_twice + u.lines_twice} lines twice",
            "holds": r.speedup >= TARGET_SPEEDUP and kept,
            "margin": f"{r.speedup / TARGET_SPEEDUP:.2f}x",
        }
    ]


def render_owned(r: OwnedResult, console: Console) -> None:
    """W7's table."""
    writes = "appends and fsyncs a file per handling" if r.fsync else "writes nothing"
    table = Table(
        title=f"W7: one-step workflows through an exclusive owner ({r.keys} keys; it {writes}), "
        "every role in this process"
    )
    table.add_column("figure")
    table.add_column(
        f"batched (max_items {r.max_items}, max_delay {r.max_delay_s * 1000:g} ms)", justify="right"
    )
    table.add_column("unbatched", justify="right")
    table.add_column("reference: a plain agent, no owner, no file", justify="right")
    b, u, p = r.batched, r.unbatched, r.plain
    for name, cell in _ROWS:
        table.add_row(name, cell(b), cell(u), cell(p))
    table.add_row("batched / unbatched", f"{r.speedup:.1f}x", "", "")
    table.add_row(
        "workflows/s over the plain agent's", f"{_ratio(b, p):.2f}x", f"{_ratio(u, p):.2f}x", ""
    )
    console.print(table)


def _ratio(run: OwnedRun, reference: OwnedRun) -> float:
    return run.workflows_per_s / reference.workflows_per_s if reference.workflows_per_s else 0.0
