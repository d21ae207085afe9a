"""No round trip to PostgreSQL waits forever: a path that stalls fails after `store_timeout`.

A TCP proxy (`support.tcp_proxy`) stops forwarding while every socket stays
open, so nothing fails on its own: the kernel on the client's side has its
data acknowledged by the proxy, keepalives are answered, and a connect is
accepted. What bounds each wait is the store's own deadline.

- A store behind the proxy: each write, read and connect fails with
  StoreUnavailableError naming `store_timeout` (a lone submit, whose one
  statement is its commit, with CommitUnknownError), and the store works
  again once the proxy forwards again.
- A worker process behind the proxy (another reaches the server directly):
  held for three times `store_timeout`, the stall is logged by the stalled worker
  naming `store_timeout` before it ends, and the worker takes work again after.
- A 20 s stall (past `worker_ttl`) of a worker of a workflow that tolerates
  one failure: the stalled worker stops taking work (and says so once), the
  other takes its tasks over, and no task is charged a failure or ends in
  `error`; every acknowledged task ends `processed`.

Observations are polls with deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

from shepherd.errors import CommitUnknownError, StoreUnavailableError
from shepherd.store.postgres import PostgresStore
from support.factories import new_task
from support.fault_app import Profile, build_app
from support.fault_run import FaultRun, PostgresObserver
from support.processes import workers
from support.tcp_proxy import TcpProxy

if TYPE_CHECKING:
    from support.processes import Worker

#: A short store_timeout, so that a stall of a few of them stays short.
STORE_TIMEOUT = 2.0
#: A backstop for each awaited operation (not a timing claim).
PATIENCE = 60.0
TASKS = 200
AFTER = 100
#: The long stall: past worker_ttl (10 s by default) and past each task's window.
LONG_STALL = 20.0
NAMES_TIMEOUT = "store_timeout"
PAUSED = "no heartbeat has reached the store"
RESUMED = "takes work again"


def through(url: str, proxy: TcpProxy) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


def upstream(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


async def test_each_round_trip_through_a_stalled_path_fails_naming_store_timeout(
    postgres_url: str,
) -> None:
    with TcpProxy(*upstream(postgres_url)) as proxy:
        store = PostgresStore(through(postgres_url, proxy), store_timeout=STORE_TIMEOUT)
        await store.open()
        try:
            await store.submit_task(new_task())
            proxy.stall()
            failures: list[StoreUnavailableError] = []
            with pytest.raises(CommitUnknownError) as lone:  # its one statement is its commit
                await asyncio.wait_for(store.submit_task(new_task()), PATIENCE)
            failures.append(lone.value)
            for attempt in (
                lambda: store.claim_tasks(locked_by="stalled/s", limit=10),  # a new connect
                lambda: store.list_workers(),  # a read
                lambda: store.get_task("nothing"),  # another read
            ):
                with pytest.raises(StoreUnavailableError) as caught:
                    await asyncio.wait_for(attempt(), PATIENCE)
                failures.append(caught.value)
            proxy.resume()
            claimed = await asyncio.wait_for(
                store.claim_tasks(locked_by="back/s", limit=10), PATIENCE
            )
            assert await asyncio.wait_for(store.list_workers(), PATIENCE) == []
        finally:
            await store.close()

    for failure in failures:
        assert f"{NAMES_TIMEOUT} ({STORE_TIMEOUT:g} s)" in failure.message, failure.message
    assert "the outcome is unknown" in failures[0].message
    # The first submit, and the second if its commit went through before the stall.
    assert 1 <= len(claimed) <= 2
    assert store.statistics()["writer_timeouts"] >= 1


def stderr_lines(worker: Worker, text: str) -> list[str]:
    return [line for line in worker.stderr(10**7).splitlines() if text in line]


async def wait_for_line(worker: Worker, text: str, *, until: float) -> list[str]:
    """Poll `worker`'s stderr for lines holding `text` until the monotonic instant `until`."""
    while True:
        found = stderr_lines(worker, text)
        if found or time.monotonic() >= until:
            return found
        await asyncio.sleep(0.1)


async def takes_work_again(run: FaultRun, worker: Worker, what: str) -> None:
    """Submit AFTER tasks; `worker` must claim some of them."""
    fresh = await run.submit(AFTER, tag="after")
    await run.wait_done(timed=False)
    claims = await run.claims_by_pid(fresh)
    run.notes.append(f"after {what}: {claims.get(worker.pid, 0)} of {AFTER} new tasks claimed")
    assert claims.get(worker.pid, 0) > 0, (
        f"{worker.name} claimed none of {AFTER} tasks submitted after {what}: "
        f"claims by pid {dict(claims)}{run.report_tail()}{run.describe_workers()}"
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_stalled_worker_names_store_timeout_before_the_stall_ends_and_works_after(
    postgres_url: str, tmp_path: Path
) -> None:
    with TcpProxy(*upstream(postgres_url)) as proxy:
        async with build_app(postgres_url) as app:
            with workers() as running:
                run = FaultRun(
                    fault=f"a proxy stalled for 3 x store_timeout ({3 * STORE_TIMEOUT:g} s)",
                    app=app,
                    observer=PostgresObserver(postgres_url),
                    store_url=postgres_url,
                    workdir=tmp_path,
                    running=running,
                    worker_env={"SHEPHERD_STORE_TIMEOUT": str(STORE_TIMEOUT)},
                )
                proxied, _direct = await run.start_workers(
                    ["proxied", "direct"], urls=[through(postgres_url, proxy), postgres_url]
                )
                await run.submit(TASKS)
                await run.wait_progress(0.3)
                await run.fault_starts()
                proxy.stall()
                ends = time.monotonic() + 3 * STORE_TIMEOUT
                try:
                    named = await wait_for_line(proxied, NAMES_TIMEOUT, until=ends)
                    await asyncio.sleep(max(0.0, ends - time.monotonic()))  # the stall's length
                    still_stalled = proxy.open_connections()
                finally:
                    proxy.resume()
                run.fault_ends()
                assert named, (
                    f"the stalled worker logged no line naming {NAMES_TIMEOUT} during the "
                    f"stall{run.report_tail()}{run.describe_workers()}"
                )
                run.notes.append(f"first line naming {NAMES_TIMEOUT}: {named[0]}")
                run.notes.append(
                    f"connections through the proxy at the stall's end: {still_stalled}"
                )
                await run.wait_done()
                await takes_work_again(run, proxied, "the stall")
                await run.verify()
    # Each loop that met the stall said so once (the outage's first line), not once a retry.
    lost = stderr_lines(proxied, "lost the store")
    loops = [line.split("shepherd.", 1)[-1].split(": lost the store")[0] for line in lost]
    assert len(loops) == len(set(loops)), lost


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_twenty_second_stall_charges_no_task_a_failure(
    postgres_url: str, tmp_path: Path
) -> None:
    profile = Profile(max_failures=1)
    with TcpProxy(*upstream(postgres_url)) as proxy:
        async with build_app(postgres_url, profile=profile) as app:
            with workers() as running:
                run = FaultRun(
                    fault=f"a proxy stalled for {LONG_STALL:.0f} s (max_failures=1)",
                    app=app,
                    observer=PostgresObserver(postgres_url),
                    store_url=postgres_url,
                    workdir=tmp_path,
                    running=running,
                    profile=profile,
                )
                proxied, _direct = await run.start_workers(
                    ["proxied", "direct"], urls=[through(postgres_url, proxy), postgres_url]
                )
                await run.submit(TASKS)
                await run.wait_progress(0.3)
                await run.fault_starts()
                proxy.stall()
                ends = time.monotonic() + LONG_STALL
                try:
                    paused = await wait_for_line(proxied, PAUSED, until=ends)
                    await asyncio.sleep(max(0.0, ends - time.monotonic()))  # the stall's length
                finally:
                    proxy.resume()
                run.fault_ends()
                await run.wait_done()
                resumed = await wait_for_line(proxied, RESUMED, until=time.monotonic() + PATIENCE)
                charged = await run.observer.rows(
                    "SELECT process_state, count(*) FROM tasks "
                    "WHERE failure_count > 0 OR process_state = 'error' GROUP BY process_state"
                )
                run.notes.append(f"tasks charged a failure or in error: {charged}")
                await takes_work_again(run, proxied, "the stall")
                await run.verify()
    assert paused, f"the stalled worker never stopped taking work{run.report_tail()}"
    assert len(stderr_lines(proxied, PAUSED)) == 1
    assert resumed, f"the stalled worker never took work again{run.report_tail()}"
    assert charged == [], f"tasks charged by the stall: {charged}{run.report_tail()}"
