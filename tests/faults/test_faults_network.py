"""Workers survive a network that fails between them and PostgreSQL.

A host cut off: two worker "hosts" are network namespaces linked to this
machine by veth pairs, each running one `shepherd run` process whose store is
reached over its own link. Half-way through the work, host A's link goes down
for at least 15 s (no reset reaches the server), and stays down until host B
has finished every task, A's included once their `complete_by` has passed; A must still be
alive after the heal and take work again.

A stalling proxy: one worker reaches PostgreSQL through a TCP proxy that stops
forwarding (sockets open, nothing passes) for 20 s, then cuts every connection;
the other worker connects directly. Every task ends processed, and the proxied
worker is alive and takes work again once the proxy forwards again.

In both, no task is charged a failure (the app's workflow has `max_failures=1`:
one charge would end a task in `error`) or compensated.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from support import netns
from support.fault_app import build_app
from support.fault_run import FaultRun, PostgresObserver, owner_pid
from support.pgcluster import PgCluster
from support.processes import workers
from support.tcp_proxy import TcpProxy

if TYPE_CHECKING:
    from pathlib import Path

    from support.pgcluster import FaultDb
    from support.processes import Worker

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: The port of the cluster listening on the hosts' links (the fault cluster is on 25433;
#: both below the ephemeral range, see FAULT_PORT).
NETWORK_PORT = 25434
TASKS = 300
#: How long host A is cut off at least (past every `complete_by` it held).
CUT_FOR = 15.0
#: How long host B may take, after those, to finish every task while A is still cut off.
B_PATIENCE = 60.0
#: How long the proxy stalls before it cuts.
STALL_FOR = 20.0
#: Tasks submitted after a heal, to see the healed worker take some.
AFTER_HEAL = 200


async def db_now(run: FaultRun) -> datetime:
    """The database's clock (what `updated_at` is written with)."""
    for _ in range(50):
        rows = await run.observer.rows("SELECT clock_timestamp()")
        if rows:
            value = rows[0][0]
            assert isinstance(value, datetime)
            return value
        await asyncio.sleep(0.1)
    raise AssertionError("the database's clock could not be read")


async def sessions_from(run: FaultRun, host: netns.Host) -> int | None:
    """The server's sessions from `host`'s address, as the server sees them."""
    rows = await run.observer.rows(
        "SELECT count(*) FROM pg_stat_activity WHERE client_addr = ?::inet", (host.ns_addr,)
    )
    return None if rows is None else int(rows[0][0])


async def all_processed(run: FaultRun, task_ids: list[str]) -> bool:
    """Whether every one of `task_ids` is `processed`."""
    rows = await run.observer.rows(
        "SELECT count(*) FROM tasks WHERE id = ANY(?) AND process_state = 'processed'",
        (task_ids,),
    )
    return rows is not None and int(rows[0][0]) == len(task_ids)


async def last_claims(run: FaultRun, task_ids: list[str]) -> dict[str, int]:
    """The pid of each task's last claim (from its `claimed` events)."""
    rows = await run.observer.rows(
        "SELECT task_id, detail FROM events WHERE kind = 'claimed' AND task_id = ANY(?) "
        "ORDER BY id",
        (task_ids,),
    )
    assert rows is not None, "the store could not be read"
    return {task_id: owner_pid(json.loads(detail)["owner"]) for task_id, detail in rows}


async def takes_work_again(run: FaultRun, worker: Worker, what: str) -> None:
    """Submit AFTER_HEAL tasks; `worker` must claim some of them (it works again)."""
    fresh = await run.submit(AFTER_HEAL, tag="after")
    await run.wait_done(timed=False)
    claims = await run.claims_by_pid(fresh)
    run.notes.append(
        f"after {what}: {claims.get(worker.pid, 0)} of {AFTER_HEAL} new tasks claimed by {worker.name}"
    )
    assert claims.get(worker.pid, 0) > 0, (
        f"{worker.name} claimed none of {AFTER_HEAL} tasks submitted after {what}: "
        f"claims by pid {dict(claims)}{run.report_tail()}{run.describe_workers()}"
    )


@pytest.mark.timeout(200)
@pytest.mark.usefixtures("require_root")
async def test_a_host_cut_off_from_postgres_is_replaced_by_the_other(tmp_path: Path) -> None:
    with netns.hosts(2) as (host_a, host_b):
        cluster = PgCluster(
            "network",
            NETWORK_PORT,
            listen=("127.0.0.1", host_a.root_addr, host_b.root_addr),
            trusted=(netns.SUBNET,),
        )
        try:
            await asyncio.to_thread(cluster.create)
            dbname = await asyncio.to_thread(cluster.create_database)
            local = cluster.url(dbname)
            async with build_app(local) as app:
                with workers() as running:
                    run = FaultRun(
                        fault=f"host A cut off from PostgreSQL for {CUT_FOR:.0f} s (link down)",
                        app=app,
                        observer=PostgresObserver(local),
                        store_url=local,
                        workdir=tmp_path,
                        running=running,
                    )
                    a, b = await run.start_workers(
                        ["host-a", "host-b"],
                        prefixes=[host_a.exec_prefix(), host_b.exec_prefix()],
                        urls=[cluster.url(dbname, host=h.root_addr) for h in (host_a, host_b)],
                    )
                    load = await run.submit(TASKS)
                    await run.wait_progress(0.5)
                    await run.fault_starts()
                    cut_start = await db_now(run)
                    host_a.cut()
                    try:
                        owned = await run.observer.rows(
                            "SELECT id FROM tasks WHERE locked_by LIKE ?", (f"%:{a.pid}:%",)
                        )
                        sessions_at_cut = await sessions_from(run, host_a)
                        await asyncio.sleep(CUT_FOR)  # the cut's least duration
                        sessions_at_heal = await sessions_from(run, host_a)
                        # The cut lasts until B has finished every task, A's included.
                        await run.wait_for(
                            "every task processed by host B while A is cut off",
                            lambda: all_processed(run, load),
                            B_PATIENCE,
                        )
                    finally:
                        host_a.heal()
                    cut_end = await db_now(run)
                    run.fault_ends()
                    assert owned is not None
                    stranded = [task_id for (task_id,) in owned]
                    run.notes.append(
                        f"tasks claimed by host A at the cut: {len(stranded)}; its sessions on "
                        f"the server: {sessions_at_cut} after {CUT_FOR:.0f} s of cut, "
                        f"{sessions_at_heal} at its end; cut from {cut_start:%H:%M:%S} to "
                        f"{cut_end:%H:%M:%S}"
                    )
                    # What A held at the cut was finished by B, under a later claim.
                    last_owner = await last_claims(run, stranded)
                    not_b = {t: pid for t, pid in last_owner.items() if pid != b.pid}
                    assert not not_b, (
                        f"tasks A held at the cut were last claimed by another than host B: "
                        f"{list(not_b.items())[:5]}{run.report_tail()}"
                    )
                    await run.wait_done()
                    await takes_work_again(run, a, "the heal")
                    await run.verify()
        finally:
            await asyncio.to_thread(cluster.destroy)


@pytest.mark.timeout(200)
async def test_a_stalled_then_cut_proxy_costs_its_worker_nothing(
    fault_db: FaultDb, tmp_path: Path
) -> None:
    cluster = fault_db.cluster
    with TcpProxy("127.0.0.1", cluster.port) as proxy:
        proxied_url = cluster.url(fault_db.name, port=proxy.port)
        async with build_app(fault_db.url) as app:
            with workers() as running:
                run = FaultRun(
                    fault=f"a proxy stalled for {STALL_FOR:.0f} s, then cut every connection",
                    app=app,
                    observer=PostgresObserver(fault_db.url),
                    store_url=fault_db.url,
                    workdir=tmp_path,
                    running=running,
                )
                proxied, _direct = await run.start_workers(
                    ["proxied", "direct"], urls=[proxied_url, fault_db.url]
                )
                await run.submit(TASKS)
                await run.wait_progress(0.5)
                await run.fault_starts()
                proxy.stall()
                await asyncio.sleep(STALL_FOR)  # the stall's duration
                cut = proxy.cut()
                accepted = proxy.accepted
                proxy.resume()
                run.fault_ends()
                run.notes.append(f"connections cut: {cut}; accepted before the cut: {accepted}")
                await run.wait_done()
                await takes_work_again(run, proxied, "the proxy forwards again")
                run.notes.append(
                    f"connections through the proxy since the cut: {proxy.accepted - accepted}"
                )
                await run.verify()
