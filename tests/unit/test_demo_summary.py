"""The demo's summary table: its middle column holds counts only, under a header that says so."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from shepherd.demo.summary import render


def summary(**changes: Any) -> dict[str, Any]:
    """A run of 90 orders in which a worker was killed (pid 48213) after 31 had ended."""
    states = dict.fromkeys(
        ("pending", "processing", "processed", "error", "compensating", "compensated"), 0
    )
    shown: dict[str, Any] = {
        "orders": 90,
        "terminal": 90,
        "states": states | {"processed": 80, "compensated": 10, "cancelled": 0},
        "reasons": {"compensated": {"step 2 (payments.charge) failed permanently": 10}},
        "faults": {"transient": 12, "slow": 3, "hang": 1},
        "agent_retries": 12,
        "agent_timeouts": 1,
        "supervisor_recoveries": 7,
        "supervisor_compensations": 0,
        "step_reexecutions": 4,
        "duplicates_prevented": 2,
        "consistency_problems": [],
        "consistency_problem_count": 0,
        "completed_steps": 270,
        "elapsed_seconds": 4.5,
        "steps_per_second": 60.0,
        "crash": {"killed_pid": 48213, "orders_ended_at_kill": 31},
    }
    return shown | changes


def rows(shown: dict[str, Any]) -> list[list[str]]:
    """The table's lines, as the words of its three columns (split on the box's bars)."""
    console = Console(width=100, record=True, color_system=None)
    render(shown, console)
    lines = console.export_text().splitlines()
    return [
        [" ".join(cell.split()) for cell in line.strip("│┃").split("│" if "│" in line else "┃")]
        for line in lines
        if line.count("│") >= 3 or line.count("┃") >= 3
    ]


def test_the_count_column_is_labelled_and_a_killed_workers_pid_is_a_detail() -> None:
    table = rows(summary())

    assert table[0] == ["what", "count", "detail"]
    by_what = {row[0]: row[1:] for row in table[1:] if row[0]}
    assert by_what["workers killed"] == ["1", "pid 48213, SIGKILL after 31 orders ended"]
    assert by_what["ledger problems"] == ["0", "stock, charges, shipments match"]
    assert by_what["completed steps"] == ["270", "in 4.50 s, 60 per second"]
    assert all(count.isdigit() for count, _ in by_what.values()), by_what


def test_ledger_problems_are_counted_beyond_those_listed() -> None:
    problems = [f"order-{n} is processed but holds 0 charges" for n in range(20)]

    table = rows(summary(consistency_problems=problems, consistency_problem_count=25, crash=None))

    by_what = {row[0]: row[1:] for row in table[1:] if row[0]}
    assert by_what["ledger problems"][0] == "25"
    assert "workers killed" not in by_what
