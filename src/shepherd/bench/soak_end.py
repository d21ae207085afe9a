"""The soak's reckoning: what became of every acknowledged task, and what ran twice.

A task whose end the event stream showed is counted from it. Any other
acknowledged task is looked up: its row (ended, or still live), else its key's
tombstone (it ended and was purged); found nowhere, it is lost. Executions come
from the workers' O_APPEND logs, one line `task_id seq attempt` each.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from shepherd.bench.counts import commits, per
from shepherd.bench.measure import percentile
from shepherd.bench.pgstat import is_postgres
from shepherd.bench.soak_app import STEPS
from shepherd.bench.soak_result import SIZE_GROWTH_LIMIT, Sample, SoakResult
from shepherd.core.states import TERMINAL_STATES, ProcessState
from shepherd.errors import ShepherdError

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.bench.soak_result import RunState, SoakOptions
    from shepherd.bench.soak_workers import WorkerPool
    from shepherd.store.contract import Store

T = TypeVar("T")

#: Seconds one store call may keep failing before the soak gives up.
PATIENCE = 120.0


async def patiently(what: Callable[[], Awaitable[T]], errors: Counter[str] | None = None) -> T:
    """`await what()`, retried every 50 ms on ShepherdError for up to PATIENCE s."""
    give_up = time.monotonic() + PATIENCE
    while True:
        try:
            return await what()
        except ShepherdError as exc:
            if errors is not None:
                errors[type(exc).__name__] += 1
            if time.monotonic() >= give_up:
                raise
            await asyncio.sleep(0.05)


async def reckon(store: Store, state: RunState) -> tuple[Counter[str], set[str]]:
    """Each acknowledged task's fate (`stream`, `row`, `tombstone`, `other`, `live`, `lost`),
    and the ids of the processed ones."""
    fate: Counter[str] = Counter()
    processed: set[str] = set()
    for task_id in state.acked:
        kind = state.ended.get(task_id)
        if kind is not None:
            fate["stream" if kind == ProcessState.PROCESSED else "other"] += 1
            if kind == ProcessState.PROCESSED:
                processed.add(task_id)
            continue
        task = await patiently(partial(store.get_task, task_id))
        if task is not None:
            if task.process_state not in TERMINAL_STATES:
                fate["live"] += 1
                continue
            state_ = task.process_state
            where = "row"
        else:
            tomb = await patiently(partial(store.get_tombstone, task_id))
            if tomb is None:
                fate["lost"] += 1
                continue
            state_ = tomb.process_state
            where = "tombstone"
        if state_ is ProcessState.PROCESSED:
            fate[where] += 1
            processed.add(task_id)
        else:
            fate["other"] += 1
    return fate, processed


def executions(logs: list[Path]) -> tuple[Counter[tuple[str, str]], int]:
    """Executions per step (`task_id`, `seq`) over every log, and how many repeated an attempt."""
    steps: Counter[tuple[str, str]] = Counter()
    attempts: Counter[str] = Counter()
    for log in logs:
        if not log.exists():
            continue
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            steps[(parts[0], parts[1])] += 1
            attempts[line] += 1
    return steps, sum(attempts.values()) - len(attempts)


def missing_steps(steps: Counter[tuple[str, str]], processed: set[str]) -> int:
    """Steps of processed tasks that no log shows an execution of."""
    seen: defaultdict[str, int] = defaultdict(int)
    for task_id, _seq in steps:
        seen[task_id] += 1
    return sum(max(0, STEPS - seen.get(task_id, 0)) for task_id in processed)


def size_check(
    samples: list[Sample], minutes: float
) -> tuple[int | None, int | None, float | None, bool]:
    """The store's size at minute M/2 and M, their ratio, and whether it is within the limit."""
    by_time = {s.at_s: s for s in samples}

    def at(seconds: float) -> int | None:
        if not by_time:
            return None
        closest = min(by_time, key=lambda t: abs(t - seconds))
        return by_time[closest].store_bytes

    half, end = at(30.0 * minutes), at(60.0 * minutes)
    if not half or end is None:
        return half, end, None, False
    ratio = end / half
    return half, end, round(ratio, 3), ratio <= SIZE_GROWTH_LIMIT


def _ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1000, 1) if values else 0.0


async def summarize(
    store: Store,
    state: RunState,
    pool: WorkerPool,
    opts: SoakOptions,
    *,
    url: str,
    drain: tuple[float, bool],
    rss: tuple[list[int | None], list[int | None], list[float]],
    after_drain: Sample,
) -> SoakResult:
    """The soak's figures, once the workers have stopped."""
    fate, processed = await reckon(store, state)
    steps, same_attempt = executions(pool.logs)
    half, end, ratio, holds = size_check(state.samples, opts.minutes)
    duration = max(state.submit_end - state.started, 1e-9)
    runs = sum(steps.values())
    return SoakResult(
        workload="soak",
        store_kind="postgresql" if is_postgres(url) else "sqlite",
        minutes=opts.minutes,
        rate_target=opts.rate,
        rate_sustained=round(len(state.acked) / duration, 1),
        step_sleep_s=opts.sleep,
        retention_s=opts.retention,
        key_retention_s=opts.retention,
        purge_interval_s=opts.purge_interval,
        kill_every_s=opts.kill_every,
        restart_every_s=opts.restart_every if opts.restart_command else None,
        restart_command=opts.restart_command,
        submitted=len(state.acked),
        commits_per_workflow=per(commits(store.statistics()) + pool.commits, len(state.acked)),
        scheduled=state.scheduled,
        submit_errors=dict(state.errors),
        submit_latency_p50_ms=_ms(state.latencies, 50),
        submit_latency_p99_ms=_ms(state.latencies, 99),
        submit_latency_max_ms=_ms(state.latencies, 100),
        schedule_lag_max_s=round(state.lag_max, 3),
        processed=len(processed),
        processed_via={k: fate[k] for k in ("stream", "row", "tombstone")},
        ended_otherwise=fate["other"],
        still_live=fate["live"],
        tasks_lost=fate["lost"],
        drain_s=round(drain[0], 2),
        drained=drain[1],
        executions=runs,
        distinct_steps=len(steps),
        duplicated_executions=runs - len(steps),
        duplicated_same_attempt=same_attempt,
        steps_missing=missing_steps(steps, processed),
        kills=list(pool.kills),
        worker_failed_starts=pool.failed_starts,
        worker_unexpected_exits=pool.unexpected_exits,
        restarts=list(state.restarts),
        rss_start_kib=rss[0],
        rss_end_kib=rss[1],
        end_uptimes_s=[round(u, 1) for u in rss[2]],
        samples=list(state.samples),
        after_drain=after_drain,
        size_half_bytes=half,
        size_end_bytes=end,
        size_ratio=ratio,
        size_holds=holds,
        stream_errors=state.stream_errors,
    )


__all__ = ["executions", "missing_steps", "patiently", "reckon", "size_check", "summarize"]
