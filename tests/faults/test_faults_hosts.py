"""A worker killed or frozen on another host costs its healthy tasks nothing: its beat tells.

Two worker "hosts": network namespaces linked to this machine by veth pairs,
each running one `shepherd run` process under a host name of its own (a UTS
namespace), on a PostgreSQL cluster of the test's own that listens on the
links. Neither can see the other's pid, so a dead process is known only once
its beat in the worker registry is old enough (`worker_ttl`, 10 s), long after
its claims' `complete_by` (3 s) has passed; a frozen one, once it has been
silent for two beats.

The load: 600 three-step workflows, steps of 0.05 to 0.5 s, `complete_within=3`,
`max_failures=1` (a single failure charged ends a task in `error`). Once a
quarter of the steps have completed and at least 300 run at once, the worker
that does not hold the supervisor's lease is hit:

- SIGKILLed, and started again on its host at once, as a service manager
  would: the leader, on the other host, must find the dead process by its beat
  (the process started in its place, on the dead one's host, could tell by its
  pid, but it does not lead);
- frozen: SIGSTOPped for 10 s, then SIGCONTed.

Every task must end `processed` with `failure_count` 0, nothing compensated.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from support import netns
from support.fault_app import Profile, build_app
from support.fault_run import FaultRun, PostgresObserver
from support.pgcluster import PgCluster
from support.processes import workers

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: The port of the cluster listening on the hosts' links (below the ephemeral
#: range, see FAULT_PORT; the network test's cluster is on 25434).
HOSTS_PORT = 25435
PROFILE = Profile(
    complete_within=3.0, step_within=2.0, max_failures=1, max_in_flight=300, pace=(0.05, 0.5)
)
TASKS = 600
IN_FLIGHT = 300
#: The share of the load's steps completed before the fault (so steps of every seq run).
PROGRESS = 0.25
HOSTNAMES = ("shepherd-host-a", "shepherd-host-b")
#: How long a frozen worker stays stopped.
FROZEN_FOR = 10.0


@pytest.mark.timeout(200)
@pytest.mark.usefixtures("require_root")
@pytest.mark.parametrize("fault", ["killed", "frozen"])
async def test_a_worker_killed_or_frozen_on_another_host_costs_its_tasks_nothing(
    tmp_path: Path, fault: str
) -> None:
    with netns.hosts(2) as hosts:
        cluster = PgCluster(
            "hosts",
            HOSTS_PORT,
            listen=("127.0.0.1", *(h.root_addr for h in hosts)),
            trusted=(netns.SUBNET,),
        )
        try:
            await asyncio.to_thread(cluster.create)
            dbname = await asyncio.to_thread(cluster.create_database)
            local = cluster.url(dbname)
            urls = [cluster.url(dbname, host=h.root_addr) for h in hosts]
            prefixes = [h.exec_prefix(hostname=n) for h, n in zip(hosts, HOSTNAMES, strict=True)]
            async with build_app(local, profile=PROFILE) as app:
                with workers() as running:
                    run = FaultRun(
                        fault=(
                            f"a worker SIGKILLed on its own host with {IN_FLIGHT}+ steps in "
                            "flight, then restarted there"
                            if fault == "killed"
                            else f"a worker SIGSTOPped for {FROZEN_FOR:.0f} s on its own host "
                            f"with {IN_FLIGHT}+ steps in flight"
                        )
                        + "; the leader is on the other host",
                        app=app,
                        observer=PostgresObserver(local),
                        store_url=local,
                        workdir=tmp_path,
                        running=running,
                        profile=PROFILE,
                    )
                    started = await run.start_workers(
                        ["host-a", "host-b"], prefixes=prefixes, urls=urls
                    )

                    async def registered_under_their_host_names() -> bool:
                        rows = await run.observer.rows("SELECT DISTINCT host FROM workers")
                        return rows is not None and sorted(h for (h,) in rows) == sorted(HOSTNAMES)

                    await run.wait_for(
                        f"both workers registered as {HOSTNAMES}",
                        registered_under_their_host_names,
                        30,
                    )
                    pids = {w.pid: i for i, w in enumerate(started)}
                    leader = 0

                    async def a_worker_leads() -> bool:
                        nonlocal leader
                        leader = await run.leader_pid() or 0
                        return leader in pids

                    await run.wait_for("a worker holding the supervisor lease", a_worker_leads, 30)
                    at = 1 - pids[leader]  # the follower
                    victim = started[at]
                    await run.submit(TASKS)
                    await run.wait_progress(PROGRESS)
                    await run.fault_starts(running=IN_FLIGHT)
                    if fault == "killed":
                        victim.kill()
                        run.fault_ends()
                        await run.replace_worker(
                            victim, f"{victim.name}-restarted", prefix=prefixes[at], url=urls[at]
                        )
                        run.notes.append(
                            f"killed {victim.name} (pid {victim.pid} on {HOSTNAMES[at]}); "
                            "restarted on the same host"
                        )
                    else:
                        victim.freeze()
                        try:
                            await asyncio.sleep(FROZEN_FOR)  # the fault's duration
                        finally:
                            victim.thaw()
                        run.fault_ends()
                        run.notes.append(
                            f"froze {victim.name} (pid {victim.pid} on {HOSTNAMES[at]})"
                        )
                    await run.wait_done()
                    # How the registry learnt of it: `died_at` is set only by a process on
                    # the dead one's host that found its pid gone.
                    rows = await run.observer.rows(
                        "SELECT died_at IS NOT NULL, reaped_at IS NOT NULL FROM workers "
                        "WHERE instance LIKE ?",
                        (f"{HOSTNAMES[at]}:{victim.pid}:%",),
                    )
                    run.notes.append(
                        f"the hit worker's registry row (died_at set, reaped_at set): {rows}; "
                        f"the supervisor's lease now held by pid {await run.leader_pid()}"
                    )
                    await run.verify()
        finally:
            await asyncio.to_thread(cluster.destroy)
