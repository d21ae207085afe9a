"""The demo's summary: what happened to the orders, gathered from the store and the ledger."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from rich.table import Table

from shepherd.core.events import EventKind
from shepherd.core.states import TERMINAL_STATES, ProcessState
from shepherd.demo.services import Fault, Ledger

if TYPE_CHECKING:
    from rich.console import Console

    from shepherd.app import App
    from shepherd.demo.app import DemoOptions


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class CrashReport:
    """The worker that `--crash` killed, and how many orders had ended by then."""

    pid: int
    terminal_at_kill: int


def _reason(error: Any) -> str:
    if isinstance(error, dict) and error.get("reason"):
        return str(error["reason"])
    return "(no reason recorded)" if error is None else str(error)


#: The events that end a task (one each: the demo retries nothing).
_ENDINGS = (EventKind.PROCESSED, EventKind.COMPENSATED, EventKind.CANCELLED, EventKind.ERROR)
#: Seconds to wait for the events of every ended task to be readable.
EVENTS_PATIENCE = 10.0


async def _event_kinds(app: App, ended: int) -> tuple[Counter[str], int]:
    """Events by kind, and how many `compensating` events the supervisor caused.

    Reads until the events of the `ended` tasks have all been read (or
    EVENTS_PATIENCE has passed): on PostgreSQL an event becomes readable only
    once every transaction older than its own has ended, on the whole server,
    so a summary read at once could count a busy server's last steps short.
    """
    kinds: Counter[str] = Counter()
    by_supervisor = 0
    cursor = 0
    deadline = asyncio.get_running_loop().time() + EVENTS_PATIENCE
    while True:
        while batch := await app.store.read_events(reply_to=None, after_id=cursor, limit=1000):
            for event in batch:
                kinds[event.kind] += 1
                if event.kind == EventKind.COMPENSATING and "complete_by expired" in _reason(
                    (event.detail or {}).get("error")
                ):
                    by_supervisor += 1
            cursor = batch[-1].id
        seen = sum(kinds[kind] for kind in _ENDINGS)
        if seen >= ended or asyncio.get_running_loop().time() >= deadline:
            return kinds, by_supervisor
        await asyncio.sleep(app.settings.poll_interval)


#: What an order holds at each service: order_id -> count of records in force.
_HELD = {
    "reservation": "SELECT order_id, count(*) FROM reservations WHERE state = 'reserved' GROUP BY order_id",
    "charge": "SELECT order_id, count(*) FROM charges WHERE state = 'charged' GROUP BY order_id",
    "shipment": "SELECT order_id, count(*) FROM shipments WHERE state = 'created' GROUP BY order_id",
}


def audit(ledger: Ledger, processed: set[str], undone: set[str]) -> list[str]:
    """Compare the services' records with the orders' outcomes; return the problems.

    A processed order holds exactly one reservation, one charge and one shipment;
    an undone (compensated or cancelled) order holds none; the stock that left the
    shelves is exactly what the reservations in force hold. Orders in `error` wait
    for an operator and are not checked.
    """
    db = ledger.conn
    problems: list[str] = []
    for what, sql in _HELD.items():
        held: dict[str, int] = dict(db.execute(sql).fetchall())
        problems.extend(
            f"{order} is processed but holds {held.get(order, 0)} {what}s"
            for order in sorted(processed)
            if held.get(order, 0) != 1
        )
        problems.extend(
            f"{order} was undone but still holds {held[order]} {what}(s)"
            for order in sorted(undone)
            if held.get(order, 0)
        )
    taken = db.execute("SELECT coalesce(sum(initial - level), 0) FROM stock").fetchone()[0]
    held_units = sum(
        int(item["qty"])
        for (items,) in db.execute("SELECT items FROM reservations WHERE state = 'reserved'")
        for item in json.loads(items)
    )
    if taken != held_units:
        problems.append(f"{taken} units left the stock but reservations hold {held_units}")
    return problems


async def collect(
    app: App, options: DemoOptions, *, elapsed: float, crash: CrashReport | None
) -> dict[str, Any]:
    """The summary as a JSON object (the `--json` output)."""
    counts = await app.store.count_tasks()
    tasks = await app.list_tasks(limit=options.orders + 1000)
    reasons: dict[str, Counter[str]] = {
        "compensated": Counter(),
        "cancelled": Counter(),
        "error": Counter(),
    }
    for task in tasks:
        if str(task.process_state) in reasons:
            reasons[str(task.process_state)][_reason(task.error)] += 1
    ended = sum(counts.get(s, 0) for s in (*TERMINAL_STATES, ProcessState.ERROR))
    kinds, by_supervisor = await _event_kinds(app, ended)
    keys = {
        state: {t.key for t in tasks if t.process_state is state and t.key}
        for state in ProcessState
    }
    ledger = Ledger(options.services)
    try:
        counters = ledger.counters()
        problems = audit(
            ledger,
            keys[ProcessState.PROCESSED],
            keys[ProcessState.COMPENSATED] | keys[ProcessState.CANCELLED],
        )
    finally:
        ledger.close()
    terminal = sum(counts.get(s, 0) for s in TERMINAL_STATES)
    steps = kinds[EventKind.STEP_COMPLETED]
    return {
        "orders": options.orders,
        "terminal": terminal,
        "all_terminal": terminal >= options.orders,
        "states": {str(s): counts.get(s, 0) for s in ProcessState},
        "reasons": {state: dict(c.most_common()) for state, c in reasons.items()},
        "faults": {
            f.value: counters.get(f"fault_{f.value}", 0) for f in Fault if f is not Fault.NONE
        }
        | {"declined": counters.get("declined", 0)},
        "agent_retries": counters.get("agent_retries", 0),
        "agent_timeouts": counters.get("timeouts", 0),
        "step_reexecutions": counters.get("reexecutions", 0),
        "supervisor_recoveries": kinds[EventKind.RESET],
        "supervisor_compensations": by_supervisor,
        "duplicates_prevented": counters.get("duplicates_prevented", 0),
        "consistent": not problems,
        "consistency_problems": problems[:20],
        "consistency_problem_count": len(problems),
        "completed_steps": steps,
        "elapsed_seconds": round(elapsed, 3),
        "steps_per_second": round(steps / elapsed, 1) if elapsed > 0 else 0.0,
        "crash": None
        if crash is None
        else {"killed_pid": crash.pid, "orders_ended_at_kill": crash.terminal_at_kill},
        "options": {
            "seed": options.seed,
            "transient_rate": options.transient_rate,
            "slow_rate": options.slow_rate,
            "hang_rate": options.hang_rate,
            "decline_rate": options.decline_rate,
            "step_within": options.step_within,
        },
    }


def render(summary: dict[str, Any], console: Console) -> None:
    """Print the summary as a table whose middle column holds counts only.

    The run's other facts (the ledger check, the time taken, a killed
    worker's pid) are in the detail column, so no number there is mistaken
    for a count of something else.
    """
    table = Table(title="shepherd demo: order processing", title_justify="left")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_column("detail", style="dim")
    states = summary["states"]
    table.add_row("[bold]orders", str(summary["orders"]), f"{summary['terminal']} ended")
    for state, style in (
        ("processed", "green"),
        ("compensated", "yellow"),
        ("cancelled", "yellow"),
        ("error", "red"),
    ):
        if state == "cancelled" and not states[state]:
            continue
        reasons = [f"{n} x {reason}" for reason, n in summary["reasons"].get(state, {}).items()]
        table.add_row(f"  [{style}]{state}", str(states[state]), reasons[0] if reasons else "")
        for reason in reasons[1:]:
            table.add_row("", "", reason)
    for state in ("pending", "processing", "compensating"):
        if states[state]:
            table.add_row(f"  [red]still {state}", str(states[state]), "")
    table.add_section()
    faults = summary["faults"]
    table.add_row(
        "faults injected",
        str(sum(faults.values())),
        ", ".join(f"{k} {v}" for k, v in faults.items()),
    )
    table.add_row(
        "agent retries", str(summary["agent_retries"]), "transient faults retried in the agent"
    )
    table.add_row(
        "agent timeouts", str(summary["agent_timeouts"]), "handler cancelled at complete_by"
    )
    table.add_row(
        "supervisor recoveries",
        str(summary["supervisor_recoveries"]),
        "expired claims reset to pending",
    )
    table.add_row(
        "  gave up, compensated", str(summary["supervisor_compensations"]), "max_failures reached"
    )
    table.add_row(
        "step re-executions", str(summary["step_reexecutions"]), "a step sent to an agent again"
    )
    table.add_row(
        "duplicates prevented", str(summary["duplicates_prevented"]), "by idempotency keys"
    )
    crash = summary["crash"]
    if crash is not None:
        table.add_row(
            "workers killed",
            "1",
            f"pid {crash['killed_pid']}, SIGKILL after {crash['orders_ended_at_kill']} "
            "orders ended",
        )
    table.add_section()
    problems = summary["consistency_problems"]
    count = summary["consistency_problem_count"]
    table.add_row(
        "ledger problems",
        f"[red]{count}" if count else "[green]0",
        "; ".join(problems[:3]) if problems else "stock, charges, shipments match",
    )
    elapsed = summary["elapsed_seconds"]
    table.add_row(
        "completed steps",
        str(summary["completed_steps"]),
        f"in {elapsed:.2f} s, {summary['steps_per_second']:.0f} per second",
    )
    console.print(table)
