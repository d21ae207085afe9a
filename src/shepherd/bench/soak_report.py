"""The soak's figures as Rich tables, and its targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from shepherd.bench.soak_result import SIZE_GROWTH_LIMIT

if TYPE_CHECKING:
    from rich.console import Console

    from shepherd.bench.soak_result import Sample, SoakResult


def _mib(size: int | None) -> str:
    return "-" if size is None else f"{size / 2**20:,.1f}"


def _kib(values: list[int | None], unit: str = " MiB") -> str:
    return "/".join("-" if v is None else f"{v / 1024:,.1f}" for v in values) + unit


def targets(r: SoakResult) -> list[dict[str, Any]]:
    """The soak's targets: nothing lost, a bounded store, the asked-for rate."""
    ratio = "-" if r.size_ratio is None else f"{r.size_ratio:.3f}"
    return [
        {
            "workload": r.workload,
            "target": "0 lost (acknowledged, neither processed nor live at the end)",
            "measured": f"{r.tasks_lost} lost of {r.submitted:,}",
            "holds": r.tasks_lost == 0,
            "margin": "-",
        },
        {
            "workload": r.workload,
            "target": f"store size at minute M <= {SIZE_GROWTH_LIMIT:g} x size at minute M/2",
            "measured": f"{_mib(r.size_end_bytes)} / {_mib(r.size_half_bytes)} MiB = {ratio}",
            "holds": r.size_holds,
            "margin": "-" if r.size_ratio is None else f"{SIZE_GROWTH_LIMIT / r.size_ratio:.2f}x",
        },
        {
            "workload": r.workload,
            "target": f"sustain {r.rate_target:g} submits/s",
            "measured": f"{r.rate_sustained:,.1f} submits/s",
            "holds": r.rate_sustained >= 0.99 * r.rate_target,
            "margin": f"{r.rate_sustained / r.rate_target:.2f}x",
        },
    ]


def _restarts(r: SoakResult) -> str:
    if r.restart_command is None:
        return "none"
    failed = sum(1 for x in r.restarts if x.returncode != 0)
    longest = max((x.took_s for x in r.restarts), default=0.0)
    return f"{len(r.restarts)} every {r.restart_every_s:g} s ({failed} failed, longest {longest:.1f} s)"


def _rows(r: SoakResult) -> list[tuple[str, str]]:
    kills = ", ".join(f"{k.uptime_s:.0f} s/{_kib([k.rss_kib])}" for k in r.kills[:6])
    return [
        ("store", r.store_kind),
        ("minutes / submits per second asked", f"{r.minutes:g} / {r.rate_target:g}"),
        ("submitted (acknowledged) / scheduled", f"{r.submitted:,} / {r.scheduled:,}"),
        ("submits per second sustained", f"{r.rate_sustained:,.1f}"),
        ("submit latency p50 / p99 / max, ms",
         f"{r.submit_latency_p50_ms:g} / {r.submit_latency_p99_ms:g} / {r.submit_latency_max_ms:g}"),
        ("worst lag behind the timer", f"{r.schedule_lag_max_s:.2f} s"),
        ("failed submit attempts (retried, same key)",
         ", ".join(f"{k} {v}" for k, v in r.submit_errors.items()) or "0"),
        ("processed", f"{r.processed:,}"),
        ("... seen on the event stream / row / tombstone",
         " / ".join(f"{r.processed_via.get(k, 0):,}" for k in ("stream", "row", "tombstone"))),
        ("ended otherwise / still live", f"{r.ended_otherwise} / {r.still_live}"),
        ("LOST", str(r.tasks_lost)),
        ("drain after the last submit", f"{r.drain_s:.1f} s ({'all ended' if r.drained else 'GAVE UP'})"),
        ("handler executions / distinct steps", f"{r.executions:,} / {r.distinct_steps:,}"),
        ("store commits per workflow (bench + workers)", f"{r.commits_per_workflow:.2f}"),
        ("duplicated executions (same attempt)",
         f"{r.duplicated_executions} ({r.duplicated_same_attempt})"),
        ("steps of processed tasks never executed", str(r.steps_missing)),
        ("worker SIGKILLs", f"{len(r.kills)} every {r.kill_every_s:g} s"),
        ("killed at uptime/RSS (first 6)", kills or "-"),
        ("failed worker starts / unexpected exits",
         f"{r.worker_failed_starts} / {r.worker_unexpected_exits}"),
        ("server restarts", _restarts(r)),
        ("worker RSS at start", _kib(r.rss_start_kib)),
        ("worker RSS at end (uptime)",
         f"{_kib(r.rss_end_kib)} ({', '.join(f'{u:.0f} s' for u in r.end_uptimes_s)})"),
        ("retention / key retention / purge interval",
         f"{r.retention_s:g} / {r.key_retention_s:g} / {r.purge_interval_s:g} s"),
        ("store size M/2 -> M, MiB", f"{_mib(r.size_half_bytes)} -> {_mib(r.size_end_bytes)}"),
        (f"size ratio (<= {SIZE_GROWTH_LIMIT:g})",
         "-" if r.size_ratio is None else f"{r.size_ratio:.3f} ({'holds' if r.size_holds else 'EXCEEDED'})"),
    ]  # fmt: skip


def _sample_row(s: Sample) -> tuple[str, ...]:
    return (
        f"{s.minute:g}",
        f"{s.acknowledged:,}",
        f"{s.processed:,}",
        "-" if s.live is None else f"{s.live:,}",
        _mib(s.main_bytes),
        _mib(s.wal_bytes),
        _mib(s.store_bytes),
        _kib(s.worker_rss_kib, ""),
    )


def render_soak(r: SoakResult, console: Console) -> None:
    """Print the soak's figures and its per-minute samples."""
    table = Table(title="soak: steady submits, worker SIGKILLs, server restarts, retention")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in _rows(r):
        table.add_row(name, value)
    console.print(table)
    samples = Table(title="soak: each minute (and M/2, M, after the drain)")
    for name in ("minute", "acked", "processed", "live", "main MiB", "WAL MiB", "total MiB",
                 "RSS MiB"):  # fmt: skip
        samples.add_column(name, justify="right")
    for s in r.samples:
        samples.add_row(*_sample_row(s))
    samples.add_row(*_sample_row(r.after_drain), style="dim")
    console.print(samples)


__all__ = ["render_soak", "targets"]
