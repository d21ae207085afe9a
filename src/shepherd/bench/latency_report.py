"""The latency workloads' output (W4, W6, lone): their tables and their targets.

The targets are the latency issue's, for this 2-core VM; some differ by backend.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.table import Table

from shepherd.bench.lone import LoneResult
from shepherd.bench.one_by_one import OneByOneResult
from shepherd.bench.open_loop import OpenLoopResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from shepherd.bench.measure import Spread

LatencyResult = OneByOneResult | OpenLoopResult | LoneResult

#: Lone submit → result, three no-op steps.
LONE_P50_S = 0.010
LONE_P99_S = 0.025
#: One `await app.submit` at a time, per call (SQLite: `synchronous=FULL`).
SUBMIT_S = {"sqlite": 0.0003, "postgresql": 0.0005}
W4_WORKFLOWS_PER_S = {"sqlite": 1500.0, "postgresql": 1200.0}
#: W6: the rate the issue states its target at, and the target.
W6_RATE = 1000.0
W6_P99_S = 0.050
#: An idle worker's CPU use, as a fraction of one core.
IDLE_CPU = 0.01

_BACKEND = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def _ms(seconds: float, digits: int = 1) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:,.{digits}f}"


def _ratio(target: float, measured: float) -> str:
    """How many times better than the target (above 1: it holds)."""
    if math.isnan(measured) or measured <= 0:
        return "-"
    return f"{target / measured:.2f}x"


def _row(workload: str, target: str, measured: str, holds: bool, margin: str) -> dict[str, Any]:
    return {
        "workload": workload,
        "target": target,
        "measured": measured,
        "holds": holds,
        "margin": margin,
    }


def _lone(r: LoneResult) -> list[dict[str, Any]]:
    out = []
    for run in r.runs:
        p50, p99 = run.latency.p50_s, run.latency.p99_s
        out.append(
            _row(
                f"lone {run.mode}",
                f"submit -> result p50 <= {_ms(LONE_P50_S, 0)} ms, p99 <= {_ms(LONE_P99_S, 0)} "
                "ms, 0 lost",
                f"p50 {_ms(p50)} ms, p99 {_ms(p99)} ms, {run.tasks_lost} lost",
                p50 <= LONE_P50_S and p99 <= LONE_P99_S and run.tasks_lost == 0,
                # The tighter of the two, so that below 1 means a miss.
                "-" if math.isnan(p99) else _ratio(1.0, max(p50 / LONE_P50_S, p99 / LONE_P99_S)),
            )
        )
    if r.worker_idle_cpu is not None:
        out.append(
            _row(
                "lone apart",
                f"idle worker CPU <= {IDLE_CPU:.0%} of one core",
                f"{r.worker_idle_cpu:.2%} over {r.idle_s:g} s",
                r.worker_idle_cpu <= IDLE_CPU,
                _ratio(IDLE_CPU, r.worker_idle_cpu),
            )
        )
    return out


def _one_by_one(r: OneByOneResult) -> list[dict[str, Any]]:
    rate, submit = W4_WORKFLOWS_PER_S[r.backend], SUBMIT_S[r.backend]
    name = _BACKEND[r.backend]
    return [
        _row(
            "W4",
            f">= {rate:,.0f} workflows/s ({name}), 0 lost",
            f"{r.workflows_per_s:,.0f} workflows/s, {r.tasks_lost} lost",
            r.workflows_per_s >= rate and r.tasks_lost == 0,
            _ratio(r.workflows_per_s, rate),
        ),
        _row(
            "W4",
            f"one submit at a time <= {_ms(submit, 1)} ms per call ({name}"
            f"{' FULL' if r.backend == 'sqlite' else ''}; mean)",
            f"mean {_ms(r.submit.mean_s, 2)} ms (p50 {_ms(r.submit.p50_s, 2)}, "
            f"p99 {_ms(r.submit.p99_s, 2)})",
            r.submit.mean_s <= submit,
            _ratio(submit, r.submit.mean_s),
        ),
    ]


def _open_loop(r: OpenLoopResult) -> list[dict[str, Any]]:
    return [
        _row(
            f"W6 {rate.rate:,g}/s",
            f"p99 <= {_ms(W6_P99_S, 0)} ms, 0 lost"
            + ("" if rate.rate == W6_RATE else f" (the issue sets it at {W6_RATE:,g}/s)"),
            f"p99 {_ms(rate.latency.p99_s)} ms, {rate.tasks_lost} lost",
            rate.latency.p99_s <= W6_P99_S and rate.tasks_lost == 0,
            _ratio(W6_P99_S, rate.latency.p99_s),
        )
        for rate in r.rates
    ]


def targets(result: LatencyResult) -> list[dict[str, Any]]:
    """Each target of the latency issue that `result` measures, whether it holds, by what margin."""
    if isinstance(result, LoneResult):
        return _lone(result)
    if isinstance(result, OneByOneResult):
        return _one_by_one(result)
    return _open_loop(result)


def _spread(s: Spread, digits: int = 1) -> str:
    return f"{_ms(s.p50_s, digits)} / {_ms(s.p99_s, digits)} / {_ms(s.max_s, digits)}"


def _errors(by_type: dict[str, int]) -> str:
    if not by_type:
        return "0"
    return ", ".join(f"{n:,} {name}" for name, n in sorted(by_type.items()))


def _exit(code: int | None) -> str:
    return "-" if code is None else f"exited with {code} before the end"


def _table(title: str, columns: list[str], rows: list[tuple[str, list[str]]]) -> Table:
    table = Table(title=title)
    table.add_column("figure")
    for column in columns:
        table.add_column(column, justify="right")
    for name, cells in rows:
        table.add_row(name, *cells)
    return table


def _times(value: float, unit: float) -> str:
    """`value` as a multiple of `unit`."""
    if math.isnan(value) or math.isnan(unit) or unit <= 0:
        return "-"
    return f"{value / unit:.1f}x"


def _render_lone(r: LoneResult, console: Console) -> None:
    runs, bare = r.runs, r.bare_commit
    idle = "-" if r.worker_idle_cpu is None else f"{r.worker_idle_cpu:.2%} over {r.idle_s:g} s"
    cells: list[tuple[str, Callable[[Any], str]]] = [
        ("workflows submitted / processed", lambda u: f"{u.n:,} / {u.processed:,}"),
        ("tasks lost", lambda u: str(u.tasks_lost)),
        ("submit mean / p50 / p99, ms",
         lambda u: f"{_ms(u.submit.mean_s, 2)} / {_ms(u.submit.p50_s, 2)} / {_ms(u.submit.p99_s, 2)}"),
        ("submit -> result p50 / p99 / max, ms", lambda u: _spread(u.latency)),
        ("received -> processed (event log) p50 / p99 / max, ms", lambda u: _spread(u.engine)),
        ("all rounds, s", lambda u: f"{u.run_s:.2f}"),
        ("store commits per workflow", lambda u: f"{u.commits_per_workflow:.2f}"),
        ("bare write commit, same store: mean / p50 / p99, ms",
         lambda _u: f"{_ms(bare.mean_s, 2)} / {_ms(bare.p50_s, 2)} / {_ms(bare.p99_s, 2)}"),
        ("submit mean / bare commit mean", lambda u: _times(u.submit.mean_s, bare.mean_s)),
        ("worker", lambda u: _exit(u.worker_exit)),
    ]  # fmt: skip
    rows = [(name, [cell(u) for u in runs]) for name, cell in cells]
    rows.append(
        ("idle worker CPU (of one core)", ["-" if u.mode != "apart" else idle for u in runs])
    )
    title = "lone: one workflow at a time (submit, await its result, repeat)"
    console.print(_table(title, [u.mode for u in runs], rows))


def _render_one_by_one(r: OneByOneResult, console: Console) -> None:
    rows = [
        ("workflows (3 no-op steps each)", f"{r.n:,}"),
        ("submitted / processed", f"{r.submitted:,} / {r.processed:,}"),
        ("tasks lost", str(r.tasks_lost)),
        ("submit mean / p50 / p99 / max, ms",
         f"{_ms(r.submit.mean_s, 2)} / {_ms(r.submit.p50_s, 2)} / {_ms(r.submit.p99_s, 2)} / "
         f"{_ms(r.submit.max_s, 2)}"),
        ("submit phase, s", f"{r.submit_phase_s:.2f}"),
        ("first submit -> last result, s", f"{r.total_s:.2f}"),
        ("workflows/s", f"{r.workflows_per_s:,.0f}"),
        ("first received -> last processed (event log), s", f"{r.engine_s:.2f}"),
        ("client store commits / operations",
         f"{r.client_stats.get('commits', 0):,.0f} / {r.client_stats.get('operations', 0):,.0f}"),
        ("store commits per workflow (client + worker)", f"{r.commits_per_workflow:.2f}"),
        ("worker", _exit(r.worker_exit)),
    ]  # fmt: skip
    title = "W4: one client submits one at a time, one `shepherd run` worker apart"
    console.print(_table(title, ["value"], [(name, [value]) for name, value in rows]))


def _render_open_loop(r: OpenLoopResult, console: Console) -> None:
    cells: list[tuple[str, Callable[[Any], str]]] = [
        ("arrivals / acknowledged", lambda x: f"{x.arrivals:,} / {x.acknowledged:,}"),
        ("failed submits", lambda x: _errors(x.submit_errors)),
        (
            "results received / failed waits",
            lambda x: f"{x.processed:,} / {_errors(x.result_errors)}",
        ),
        ("lost (not processed in the store)", lambda x: str(x.tasks_lost)),
        ("arrival -> result p50 / p99 / max, ms", lambda x: _spread(x.latency)),
        ("submit p50 / p99 / max, ms", lambda x: _spread(x.submit, 2)),
        ("client lag behind arrivals, max ms", lambda x: _ms(x.lag_max_s)),
        ("store commits per workflow (client + worker)", lambda x: f"{x.commits_per_workflow:.2f}"),
    ]
    rows = [(name, [cell(x) for x in r.rates]) for name, cell in cells]
    rows.append(("worker", [_exit(r.worker_exit)] * len(r.rates)))
    title = f"W6: open loop, Poisson arrivals for {r.seconds:g} s per rate, worker apart"
    console.print(_table(title, [f"{x.rate:,g}/s" for x in r.rates], rows))


def render_latency(result: LatencyResult, console: Console) -> None:
    """Print one latency workload's table."""
    if isinstance(result, LoneResult):
        _render_lone(result, console)
    elif isinstance(result, OneByOneResult):
        _render_one_by_one(result, console)
    else:
        _render_open_loop(result, console)


__all__ = ["LatencyResult", "render_latency", "targets"]
