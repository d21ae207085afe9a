"""The bench's output: Rich tables for people, one JSON document with --json."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from shepherd.bench.crash import CrashResult
from shepherd.bench.event_writer import EventWriterResult
from shepherd.bench.flow import STEPS
from shepherd.bench.latency_report import LatencyResult, render_latency
from shepherd.bench.latency_report import targets as latency_targets
from shepherd.bench.lone import LoneResult
from shepherd.bench.one_by_one import OneByOneResult
from shepherd.bench.open_loop import OpenLoopResult
from shepherd.bench.owned import OwnedResult
from shepherd.bench.owned_report import render_owned
from shepherd.bench.owned_report import targets as owned_targets
from shepherd.bench.queued import QueuedResult, render_queued
from shepherd.bench.signal_latency import SignalResult
from shepherd.bench.signal_report import render_signal
from shepherd.bench.signal_report import targets as signal_targets
from shepherd.bench.sleepers import SleepersResult
from shepherd.bench.sleepers_report import render_sleepers
from shepherd.bench.sleepers_report import targets as sleepers_targets
from shepherd.bench.soak_report import render_soak
from shepherd.bench.soak_report import targets as soak_targets
from shepherd.bench.soak_result import SoakResult
from shepherd.bench.throughput import ThroughputResult

#: The targets of the benchmark issue.
TARGET_WORKFLOWS_PER_S = 1000.0

Result = (
    ThroughputResult
    | CrashResult
    | SoakResult
    | LatencyResult
    | EventWriterResult
    | QueuedResult
    | OwnedResult
    | SleepersResult
    | SignalResult
)
#: The workloads that run a fixed number of workflows.
_Counted = ThroughputResult | CrashResult


def environment(synchronous: str, store: str) -> dict[str, Any]:
    """The machine and versions the figures were taken on."""
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        #: Other processes on the machine skew every figure; this shows how busy it was.
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        "sqlite_synchronous": synchronous,
        "store": store,
    }


def targets(results: list[Result]) -> list[dict[str, Any]]:
    """Each issue target, whether it holds, and by what margin."""
    out: list[dict[str, Any]] = []
    for r in results:
        if isinstance(r, ThroughputResult) and r.capacity is not None:
            out.append(
                {
                    "workload": r.workload,
                    "target": f"at most {r.capacity} holders at once, 0 lost",
                    "measured": f"{r.most_holders} at most, {r.tasks_lost} lost",
                    "holds": (r.most_holders or 0) <= r.capacity and r.tasks_lost == 0,
                    "margin": "-",
                }
            )
        elif isinstance(r, ThroughputResult | QueuedResult):
            out.append(
                {
                    "workload": r.workload,
                    "target": f">= {TARGET_WORKFLOWS_PER_S:,.0f} workflows/s, 0 lost",
                    "measured": f"{r.workflows_per_s:,.0f} workflows/s, {r.tasks_lost} lost",
                    "holds": r.workflows_per_s >= TARGET_WORKFLOWS_PER_S and r.tasks_lost == 0,
                    "margin": f"{r.workflows_per_s / TARGET_WORKFLOWS_PER_S:.2f}x",
                }
            )
            if isinstance(r, ThroughputResult) and r.db_xacts is not None:
                per_step = r.db_xacts / (STEPS * r.n)
                out.append(
                    {
                        "workload": r.workload,
                        "target": "<= 1 database transaction per step (PostgreSQL)",
                        "measured": f"{per_step:.3f} per step ({r.db_xacts:,} for {STEPS * r.n:,})",
                        "holds": per_step <= 1.0,
                        "margin": f"{1.0 / per_step:.1f}x" if per_step else "-",
                    }
                )
        elif isinstance(r, EventWriterResult):
            out.extend(_writer_targets(r))
        elif isinstance(r, OwnedResult):
            out.extend(owned_targets(r))
        elif isinstance(r, SleepersResult):
            out.extend(sleepers_targets(r))
        elif isinstance(r, SignalResult):
            out.extend(signal_targets(r))
        elif isinstance(r, SoakResult):
            out.extend(soak_targets(r))
        elif isinstance(r, LoneResult | OneByOneResult | OpenLoopResult):
            out.extend(latency_targets(r))
        else:
            out.append(
                {
                    "workload": r.workload,
                    "target": f"kill -> all done <= claim window + supervisor interval + poll "
                    f"= {r.guaranteed_bound_s:g}s, 0 lost, 0 charged a failure",
                    "measured": f"{r.kill_to_done_s:.2f}s, {r.tasks_lost} lost, "
                    f"{r.tasks_charged} charged "
                    f"(within + interval = {r.recovery_bound_s:g}s: "
                    f"{'met' if r.kill_to_done_s <= r.recovery_bound_s else 'exceeded'})",
                    "holds": r.kill_to_done_s <= r.guaranteed_bound_s
                    and r.tasks_lost == 0
                    and r.tasks_charged == 0,
                    "margin": f"{r.guaranteed_bound_s - r.kill_to_done_s:+.2f}s",
                }
            )
    return out


#: W5's targets: acknowledged events per second with batching (SQLite FULL), and
#: how much faster than one call per handling.
TARGET_EVENTS_PER_S = 10000.0
TARGET_SPEEDUP = 5.0


def _writer_targets(r: EventWriterResult) -> list[dict[str, Any]]:
    b, u = r.batched, r.unbatched
    kept = b.lost + u.lost + b.duplicated + u.duplicated == 0
    return [
        {
            "workload": "W5 batched",
            "target": f">= {TARGET_EVENTS_PER_S:,.0f} acknowledged events/s (SQLite FULL), "
            "each exactly once",
            "measured": f"{b.events_per_s:,.0f} events/s, {b.lost} lost, {b.duplicated} twice",
            "holds": b.events_per_s >= TARGET_EVENTS_PER_S and kept,
            "margin": f"{b.events_per_s / TARGET_EVENTS_PER_S:.2f}x",
        },
        {
            "workload": "W5 batched / unbatched",
            "target": f">= {TARGET_SPEEDUP:g}x the unbatched events/s, same run",
            "measured": f"{r.speedup:.1f}x ({u.events_per_s:,.0f} events/s unbatched)",
            "holds": r.speedup >= TARGET_SPEEDUP and kept,
            "margin": f"{r.speedup / TARGET_SPEEDUP:.2f}x",
        },
    ]


def render_writer(r: EventWriterResult, console: Console) -> None:
    """W5's table."""
    table = Table(title=f"W5: event writer, {r.producers} producers, {r.keys} keys")
    table.add_column("figure")
    table.add_column(f"batched (max_items {r.max_items})", justify="right")
    table.add_column("unbatched", justify="right")
    b, u = r.batched, r.unbatched
    table.add_row("acknowledged events", f"{b.events:,}", f"{u.events:,}")
    table.add_row("seconds", f"{b.seconds:.2f}", f"{u.seconds:.2f}")
    table.add_row("events/s", f"{b.events_per_s:,.0f}", f"{u.events_per_s:,.0f}")
    table.add_row(
        "store commits per event", f"{b.commits_per_event:.3f}", f"{u.commits_per_event:.3f}"
    )
    table.add_row(
        "lost / written twice", f"{b.lost} / {b.duplicated}", f"{u.lost} / {u.duplicated}"
    )
    console.print(table)


def as_json(results: list[Result], env: dict[str, Any]) -> str:
    document = {
        "environment": env,
        "workloads": {r.workload: asdict(r) for r in results},
        "targets": targets(results),
    }
    return json.dumps(document, indent=2, default=str)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def _stats(stats: dict[str, float]) -> str:
    if not stats:
        return "-"
    return f"{stats.get('commits', 0):,.0f} commits, {stats.get('ops_per_batch', 0):.1f} ops/batch"


def _xacts(r: _Counted) -> str:
    if r.db_xacts is None:
        return "-"
    return f"{r.db_xacts:,} ({r.harness_xacts:,} polls + {r.open_close_xacts:,}/open subtracted)"


def _xacts_per(r: _Counted) -> str:
    if r.db_xacts is None:
        return "-"
    return f"{r.db_xacts / r.n:.2f} / {r.db_xacts / (STEPS * r.n):.2f}"


def _holders(r: ThroughputResult) -> str:
    if r.capacity is None:
        return "-"
    return f"{r.most_holders} / {r.capacity}"


def _bound(r: ThroughputResult) -> str:
    if r.capacity is None or r.step_sleep_s <= 0:
        return "-"
    bound = r.capacity / r.step_sleep_s
    return f"{bound:,.0f} (measured {r.steps_per_s / bound:.0%} of it)"


def _commits_per_step(r: _Counted) -> str:
    commits = r.store_stats.get("commits", 0) + (
        r.worker_stats.get("commits", 0) if isinstance(r, CrashResult) else 0
    )
    return f"{commits / (STEPS * r.n):.4f}"


_THROUGHPUT_ROWS: tuple[tuple[str, Callable[[ThroughputResult], str]], ...] = (
    ("workflows (3 steps each)", lambda r: f"{r.n:,}"),
    ("step: simulated remote call", lambda r: f"{r.step_sleep_s * 1000:g} ms"),
    ("max_in_flight / agent_concurrency",
     lambda r: f"{r.settings['max_in_flight']:,} / {r.settings['agent_concurrency']:,}"),
    ("submission (not counted), s", lambda r: f"{r.submit_s:.2f}"),
    ("roles start -> all done, s", lambda r: f"{r.run_s:.2f}"),
    ("workflows/s", lambda r: f"{r.workflows_per_s:,.0f}"),
    ("steps/s", lambda r: f"{r.steps_per_s:,.0f}"),
    ("latency submit->processed p50 / p99, ms",
     lambda r: f"{_ms(r.latency_p50_s)} / {_ms(r.latency_p99_s)}"),
    ("latency claimed->processed p50 / p99, ms",
     lambda r: f"{_ms(r.run_latency_p50_s)} / {_ms(r.run_latency_p99_s)}"),
    ("tasks lost", lambda r: str(r.tasks_lost)),
    ("store commits", lambda r: f"{r.store_stats.get('commits', 0):,.0f}"),
    ("store operations / batches",
     lambda r: f"{r.store_stats.get('operations', 0):,.0f} / {r.store_stats.get('batches', 0):,.0f}"),
    ("operations per batch", lambda r: f"{r.store_stats.get('ops_per_batch', 0):.1f}"),
    ("store commits per step", _commits_per_step),
    ("store commits per workflow (submission + run)", lambda r: f"{r.commits_per_workflow:.3f}"),
    ("database transactions (PostgreSQL, run)", _xacts),
    ("database transactions per workflow / per step", _xacts_per),
    ("capacity: most holders at once / capacity", _holders),
    ("capacity: bound capacity / step time, steps/s", _bound),
)  # fmt: skip


def render(results: list[Result], env: dict[str, Any], console: Console) -> None:
    """Print the figures as tables."""
    rows = [r for r in results if isinstance(r, ThroughputResult)]
    if rows:
        table = Table(title="Throughput: one process plays every role")
        table.add_column("figure")
        for r in rows:
            table.add_column(r.workload, justify="right")
        for name, cell in _THROUGHPUT_ROWS:
            table.add_row(name, *(cell(r) for r in rows))
        console.print(table)
    for c in (r for r in results if isinstance(r, CrashResult)):
        table = Table(title="W3: worker SIGKILLed after a third of the tasks")
        table.add_column("figure")
        table.add_column("value", justify="right")
        for name, value in (
            ("workflows", f"{c.n:,}"),
            ("processed at kill", f"{c.processed_at_kill:,}"),
            ("claimed by the killed worker", f"{c.claimed_at_kill:,}"),
            ("step window (within) + supervisor interval", f"{c.within_s:g} + {c.supervisor_interval_s:g} = {c.recovery_bound_s:g} s"),
            ("claim window (within + 1 s step grace)", f"{c.claim_window_s:g} s"),
            ("guaranteed bound (+ interval + poll_interval)", f"{c.guaranteed_bound_s:g} s"),
            ("kill -> all done", f"{c.kill_to_done_s:.2f} s"),
            ("new worker ready -> all done", f"{c.restart_to_done_s:.2f} s"),
            ("kill -> last supervisor reset", f"{c.kill_to_last_reset_s:.2f} s"),
            ("reset -> processed (worst task)", f"{c.reset_to_processed_max_s:.2f} s"),
            ("tasks lost", str(c.tasks_lost)),
            ("tasks charged a failure", str(c.tasks_charged)),
            ("handler executions / distinct steps", f"{c.executions:,} / {c.distinct_steps:,}"),
            ("duplicated executions", str(c.duplicated_executions)),
            ("supervisor resets", str(c.resets)),
            ("store (main: submit + supervisor)", _stats(c.store_stats)),
            ("store (second worker)", _stats(c.worker_stats)),
            ("store commits per workflow (all processes; the killed worker's until just before the kill)", f"{c.commits_per_workflow:.2f}"),
            ("database transactions (PostgreSQL, kill run)", _xacts(c)),
            ("database transactions per workflow / per step", _xacts_per(c)),
        ):  # fmt: skip
            table.add_row(name, value)
        console.print(table)
    for latency in results:
        if isinstance(latency, LoneResult | OneByOneResult | OpenLoopResult):
            render_latency(latency, console)
    for queued in (r for r in results if isinstance(r, QueuedResult)):
        render_queued(queued, console)
    for writer in (r for r in results if isinstance(r, EventWriterResult)):
        render_writer(writer, console)
    for owned in (r for r in results if isinstance(r, OwnedResult)):
        render_owned(owned, console)
    for soak in (r for r in results if isinstance(r, SoakResult)):
        render_soak(soak, console)
    for sleepers in (r for r in results if isinstance(r, SleepersResult)):
        render_sleepers(sleepers, console)
    for signalled in (r for r in results if isinstance(r, SignalResult)):
        render_signal(signalled, console)
    goals = Table(title="Targets")
    for name in ("workload", "target", "measured", "holds", "margin"):
        goals.add_column(name)
    for t in targets(results):
        goals.add_row(
            t["workload"], t["target"], t["measured"], "yes" if t["holds"] else "NO", t["margin"]
        )
    console.print(goals)
    durability = (
        "PostgreSQL (server's own durability settings)"
        if str(env["store"]).startswith(("postgresql://", "postgres://"))
        else f"SQLite {env['sqlite']}, synchronous={env['sqlite_synchronous']}"
    )
    console.print(
        f"Python {env['python']}, {durability}, "
        f"{env['cpu_count']} CPUs (load average {env['load_average_1m_at_start']} at start), "
        f"{env['platform']}; store {env['store']}"
    )
