"""soak: minutes of steady submits while workers are SIGKILLed and the server restarts.

Two worker processes (`shepherd.bench.soak_workers`) run every role of the
soak app with a short `retention`, so the supervisor's leader keeps purging
ended tasks. The main process runs no role: it submits on a fixed timer (open
loop, one submit at a time; a submit that fails with a ShepherdError is retried
with the same key until it is acknowledged), follows the `reply_to` event
stream of its tasks, SIGKILLs a worker every `kill_every` s (starting its
replacement at once), runs the restart command every `restart_every` s, and
samples the store's size and the workers' RSS every minute. Then it waits for
every acknowledged task to end and counts what was lost.

Counting `processed` survives retention because it never relies on the task
row: the stream shows each task's `processed` event, which stays readable for
`retention` s after the end while the follower reads every 0.25 s. An
acknowledged task whose end the follower did not see is looked up once at the
end: its row, else its key's tombstone (keys outlive rows by `key_retention`).
Only a task found nowhere, or not ended, is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

from shepherd.bench.soak_app import WORKFLOW, build_app
from shepherd.bench.soak_end import patiently, summarize
from shepherd.bench.soak_probe import run_restart, store_size
from shepherd.bench.soak_result import RunState, Sample, SoakOptions, SoakResult
from shepherd.bench.soak_workers import WorkerPool
from shepherd.core.states import TERMINAL_STATES, ProcessState
from shepherd.errors import ShepherdError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from shepherd.app import App
    from shepherd.store.contract import Store

_ENDED = frozenset(str(s) for s in TERMINAL_STATES)
_PROCESSED = str(ProcessState.PROCESSED)
#: How often the follower reads the event stream, s (far below `retention`).
FOLLOW_EVERY = 0.25


async def _submit(app: App, state: RunState, *, rate: float, until: float, tag: str) -> None:
    """Open loop: submit i starts at its slot `i / rate` (at once when late), until `until`.

    A submit that is late stays in line: the timer never waits for the store,
    and whatever the store could not take by `until` is left unsubmitted.
    """
    i = 0
    while (slot := state.started + i / rate) < until and time.monotonic() < until:
        delay = slot - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        state.lag_max = max(state.lag_max, time.monotonic() - slot)
        began = time.perf_counter()
        submit = partial(app.submit, WORKFLOW, {"i": i}, key=f"{tag}-{i}", reply_to=tag)
        task_id = await patiently(submit, state.errors)
        state.latencies.append(time.perf_counter() - began)
        state.acked.add(task_id)
        i += 1
    state.submit_end = time.monotonic()


async def _follow(store: Store, state: RunState, *, tag: str) -> None:
    """Read the `reply_to` stream and note every task's end (until cancelled)."""
    cursor = 0
    while True:
        try:
            batch = await store.read_events(reply_to=tag, after_id=cursor, limit=1000)
        except ShepherdError:
            state.stream_errors += 1
            await asyncio.sleep(FOLLOW_EVERY)
            continue
        for event in batch:
            cursor = event.id
            if event.kind in _ENDED and event.task_id not in state.ended:
                state.ended[event.task_id] = event.kind
                state.processed += event.kind == _PROCESSED
        if len(batch) < 1000:
            await asyncio.sleep(FOLLOW_EVERY)


async def _sample(app: App, state: RunState, pool: WorkerPool) -> Sample:
    at = state.elapsed()
    rss = pool.rss()
    size = await store_size(app.settings.store)
    live: int | None
    try:
        counts = await app.store.count_tasks()
        live = sum(v for k, v in counts.items() if k not in TERMINAL_STATES)
    except ShepherdError:
        live = None
    return Sample(
        at_s=round(at, 1),
        minute=round(at / 60, 2),
        acknowledged=len(state.acked),
        processed=state.processed,
        live=live,
        main_bytes=None if size is None else size.main_bytes,
        wal_bytes=None if size is None else size.wal_bytes,
        store_bytes=None if size is None else size.total_bytes,
        worker_rss_kib=rss,
    )


def sample_times(minutes: float) -> list[float]:
    """Seconds after the start to sample at: every whole minute, M/2 and M."""
    marks = {60.0 * k for k in range(int(minutes) + 1)} | {30.0 * minutes, 60.0 * minutes}
    return sorted(marks)


async def _sampler(app: App, state: RunState, pool: WorkerPool, minutes: float) -> None:
    for at in sample_times(minutes):
        delay = state.started + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        state.samples.append(await _sample(app, state, pool))


async def _every(
    period: float,
    stop: asyncio.Event,
    act: Callable[[int], Awaitable[object]],
    *,
    start: float,
    until: float,
) -> None:
    """`act(k)` at `start + k * period` (k = 1, 2, ...) before `until`, unless `stop` is set.

    An act that has begun is never cut short.
    """
    k = 1
    while (due := start + k * period) < until:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, due - time.monotonic()))
        if stop.is_set():
            return
        await act(k)
        k += 1


async def _drain(state: RunState, within: float) -> tuple[float, bool]:
    """Wait until the stream has shown every acknowledged task's end; (seconds, whether it did)."""
    began = time.monotonic()
    while not state.acked <= state.ended.keys():
        if time.monotonic() - began >= within:
            return time.monotonic() - began, False
        await asyncio.sleep(FOLLOW_EVERY)
    return time.monotonic() - began, True


def _environment(opts: SoakOptions, settings: dict[str, Any]) -> dict[str, str]:
    """The workers' environment: ours, the soak's settings as `SHEPHERD_*`, the step's sleep."""
    return {
        **os.environ,
        **{f"SHEPHERD_{k.upper()}": str(v) for k, v in settings.items()},
        "SHEPHERD_SOAK_SLEEP": str(opts.sleep),
    }


async def run_soak(store: str, workdir: Path, opts: SoakOptions) -> SoakResult:
    """Run the soak on `store`, with worker logs and stderr under `workdir`."""
    settings: dict[str, Any] = {
        "store": store,
        "retention": opts.retention,
        # Keys only need to outlive a submit's retries, which last seconds.
        "key_retention": opts.retention,
        "purge_interval": opts.purge_interval,
        "sqlite_synchronous": opts.synchronous,
    }
    tag = f"soak-{uuid.uuid4().hex[:8]}"
    app = build_app(sleep=opts.sleep, **settings)
    async with app:
        pool = WorkerPool(env=_environment(opts, settings), workdir=workdir, started=0.0)
        try:
            await pool.start()
            rss_start = pool.rss()
            state = RunState(started=time.monotonic())
            state.scheduled = math.ceil(opts.rate * 60 * opts.minutes)
            pool.started = state.started
            stop = asyncio.Event()
            follower = asyncio.create_task(_follow(app.store, state, tag=tag))
            sampler = asyncio.create_task(_sampler(app, state, pool, opts.minutes))
            watcher = asyncio.create_task(pool.watch())

            async def kill(k: int) -> None:
                await pool.kill((k - 1) % pool.size)

            end = state.started + 60 * opts.minutes
            chores = [
                asyncio.create_task(
                    _every(opts.kill_every, stop, kill, start=state.started, until=end)
                )
            ]
            if opts.restart_command:
                command, log = opts.restart_command, workdir / "soak-restarts.log"

                async def restart(_k: int) -> None:
                    state.restarts.append(
                        await run_restart(command, log=log, started=state.started)
                    )

                chores.append(
                    asyncio.create_task(
                        _every(opts.restart_every, stop, restart, start=state.started, until=end)
                    )
                )
            try:
                await _submit(app, state, rate=opts.rate, until=end, tag=tag)
                await sampler  # through the sample at minute M
                stop.set()
                await asyncio.gather(*chores)
                drain = await _drain(state, opts.drain_within)
                rss = (rss_start, pool.rss(), pool.uptimes())
                after_drain = await _sample(app, state, pool)
            finally:
                stop.set()
                for job in (follower, sampler, watcher, *chores):
                    job.cancel()
                await asyncio.gather(follower, sampler, watcher, *chores, return_exceptions=True)
        finally:
            await pool.stop()
        return await summarize(
            app.store,
            state,
            pool,
            opts,
            url=store,
            drain=drain,
            rss=rss,
            after_drain=after_drain,
        )


__all__ = ["run_soak", "sample_times"]
