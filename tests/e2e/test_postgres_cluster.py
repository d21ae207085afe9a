"""A cluster on one PostgreSQL database loses a worker and its leading supervisor mid-run.

Three processes run the scheduler and agent roles, two more run only the
supervisor; all share one fresh database. Once about a third of 1,000
three-step workflows are processed, one worker and the supervisor holding the
`supervisor` lease are SIGKILLed (no clean-up runs in them). The survivors must
finish every task: the surviving supervisor takes the lease over (a new epoch)
once it expires, resets the dead worker's claims when their `complete_by`
passes, and the other workers claim them again under a new `lock_epoch`.

PostgreSQL is never skipped: without SHEPHERD_TEST_POSTGRES_URL, or with the
server down, the `postgres_url` fixture fails the test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from shepherd import ProcessState
from shepherd.testing import wait_until
from support.processes import Worker, spawn_worker, workers
from support.worker_app import STEPS, build_app

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd import App
    from shepherd.core.records import Event

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TASKS = 1000
#: Seconds each agent execution takes (the simulated remote service).
PACE = 0.005
#: Seconds between supervisor scans; the lease (lease_ttl=1 s) is renewed every 1/3 s.
SUPERVISOR_INTERVAL = 0.3
#: Backstops for each wait, not timing claims; the whole test takes well under a minute.
PATIENCE = 45.0
FAILOVER_PATIENCE = 15.0

_LEASE = "SELECT holder, epoch FROM leases WHERE name = 'supervisor' AND expires_at > now()"
_LOCKS = "SELECT locked_by, count(*) FROM tasks WHERE locked_by IS NOT NULL GROUP BY locked_by"
_LOCKED_BY = "SELECT id FROM tasks WHERE locked_by = %s"


def pid_of(name: str) -> int:
    """The pid inside a role instance name, `host:pid:suffix/role`."""
    return int(name.split("/")[0].split(":")[1])


async def all_events(app: App) -> list[Event]:
    events: list[Event] = []
    while batch := await app.store.read_events(
        reply_to=None, after_id=events[-1].id if events else 0, limit=10_000
    ):
        events += batch
    return events


async def processed(app: App) -> int:
    return (await app.store.count_tasks()).get(ProcessState.PROCESSED, 0)


async def leader(db: psycopg.AsyncConnection[Any]) -> tuple[str, int] | None:
    """The supervisor lease's (holder, epoch) while unexpired, by the database's clock."""
    row = await (await db.execute(_LEASE)).fetchone()
    return None if row is None else (row[0], row[1])


async def start(url: str, tmp_path: Path, log: Path, running: list[Worker]) -> None:
    """Start three scheduler+agent workers and two supervisors, all at once."""
    specs: list[tuple[str, str, dict[str, float]]] = [
        (
            f"worker-{n}",
            "scheduler,agent",
            {"pace": PACE, "claim_batch": 16, "max_in_flight": 64},
        )
        for n in range(3)
    ] + [
        (f"supervisor-{n}", "supervisor", {"supervisor_interval": SUPERVISOR_INTERVAL})
        for n in range(2)
    ]
    outcomes = await asyncio.gather(
        *(
            asyncio.to_thread(
                spawn_worker, url, tmp_path, name=name, roles=roles, log_path=log, settings=options
            )
            for name, roles, options in specs
        ),
        return_exceptions=True,
    )
    running += [w for w in outcomes if isinstance(w, Worker)]
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


def stderr_of(watched: list[Worker]) -> str:
    return "".join(f"\n--- {w.name} stderr:\n{w.stderr()}" for w in watched)


async def test_a_cluster_finishes_every_task_after_losing_a_worker_and_the_leader(
    postgres_url: str,
    tmp_path: Path,
) -> None:
    url = postgres_url
    log = tmp_path / "executions.jsonl"
    async with (
        build_app(url) as app,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as db,
    ):
        with workers() as running:
            await start(url, tmp_path, log, running)
            schedulers = [w for w in running if w.name.startswith("worker-")]
            supervisors = [w for w in running if w.name.startswith("supervisor-")]
            supervisor_pids = {w.pid for w in supervisors}

            async def someone_leads() -> bool:
                now = await leader(db)
                return now is not None and pid_of(now[0]) in supervisor_pids

            await wait_until(someone_leads, timeout=FAILOVER_PATIENCE, interval=0.05)

            ids = list(await asyncio.gather(*(app.submit("chain", {"i": i}) for i in range(TASKS))))

            async def a_third_processed() -> bool:
                return await processed(app) >= TASKS * 3 // 10

            await wait_until(a_third_processed, timeout=PATIENCE, interval=0.05)

            # The worker holding the most claims dies first, then the leading supervisor.
            locks = {pid_of(owner): n for owner, n in await (await db.execute(_LOCKS)).fetchall()}
            victim = max(schedulers, key=lambda w: locks.get(w.pid, 0))
            victim.kill()
            lease = await leader(db)
            assert lease is not None, "nobody led mid-run"
            old_holder, old_epoch = lease
            dead_leader = next(w for w in supervisors if w.pid == pid_of(old_holder))
            dead_leader.kill()
            survivor = next(w for w in supervisors if w is not dead_leader)
            left = await processed(app)
            assert left < TASKS, "the kills must land mid-run"

            # What the dead worker held stays claimed by it until the supervisor resets it.
            stranded = {
                row[0]
                for owner in {o for o, _ in await (await db.execute(_LOCKS)).fetchall()}
                if pid_of(owner) == victim.pid
                for row in await (await db.execute(_LOCKED_BY, (owner,))).fetchall()
            }
            assert stranded, "the killed worker held no claim"

            async def leadership_moved() -> bool:
                now = await leader(db)
                return now is not None and pid_of(now[0]) == survivor.pid and now[1] > old_epoch

            try:
                await wait_until(leadership_moved, timeout=FAILOVER_PATIENCE, interval=0.05)
            except AssertionError:
                raise AssertionError(
                    f"the lease is {await leader(db)}, not {survivor.name}'s above epoch "
                    f"{old_epoch}{stderr_of([survivor])}"
                ) from None

            async def all_processed() -> bool:
                return await processed(app) == TASKS

            try:
                await wait_until(all_processed, timeout=PATIENCE, interval=0.1)
            except AssertionError:
                raise AssertionError(
                    f"{await processed(app)} of {TASKS} tasks processed in {PATIENCE} s: "
                    f"{await app.store.count_tasks()}{stderr_of(running)}"
                ) from None

            new_holder, new_epoch = await leader(db) or ("", 0)
            assert pid_of(new_holder) == survivor.pid
            assert new_epoch > old_epoch
            assert all(w.alive() for w in running if w not in (victim, dead_leader)), stderr_of(
                running
            )

        counts = await app.store.count_tasks()
        assert counts == {ProcessState.PROCESSED: TASKS}, counts

        # The store hands out an event once no older transaction is open anywhere
        # on the server: another client's (another test's) can hold the last ones
        # back for a while. Wait, with a deadline, until every stored one is read.
        async def every_event_readable() -> bool:
            row = await (await db.execute("SELECT count(*) FROM events")).fetchone()
            return row is not None and len(await all_events(app)) == row[0]

        await wait_until(every_event_readable, timeout=PATIENCE, interval=0.1)
        events = await all_events(app)

    # Every step recorded completed exactly once.
    recorded = Counter((e.task_id, e.detail["seq"]) for e in events if e.kind == "step_completed")
    assert set(recorded) == {(t, seq) for t in ids for seq in range(1, STEPS + 1)}
    twice = [key for key, n in recorded.items() if n > 1]
    assert not twice, f"steps recorded completed more than once: {twice[:10]}"

    # One owner per (task, lock_epoch); epochs only grow; a reset between two claims.
    scheduler_pids = {w.pid for w in schedulers}
    owner_at: dict[tuple[str, int], str] = {}
    history: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        history[event.task_id].append(event)
        if event.kind != "claimed":
            continue
        key = (event.task_id, event.detail["lock_epoch"])
        assert key not in owner_at, f"two claims of task {key[0]} at lock_epoch {key[1]}"
        owner_at[key] = event.detail["owner"]
    assert {pid_of(owner) for owner in owner_at.values()} <= scheduler_pids
    for task_id in ids:
        kinds = [e.kind for e in history[task_id] if e.kind in ("claimed", "reset", "processed")]
        epochs = [e.detail["lock_epoch"] for e in history[task_id] if e.kind == "claimed"]
        assert epochs, f"{task_id} was never claimed"
        assert epochs == sorted(set(epochs)), f"{task_id}: epochs {epochs}"
        for before, after in itertools.pairwise(kinds):
            assert (before, after) != ("claimed", "claimed"), (
                f"{task_id} was claimed again without a reset: {kinds}"
            )
        assert kinds[-1] == "processed", f"{task_id}: {kinds}"

    # The dead worker's claims were reset and finished by another process.
    for task_id in stranded:
        claims = [e for e in history[task_id] if e.kind == "claimed"]
        assert "reset" in [e.kind for e in history[task_id]], f"{task_id} finished without reset"
        assert pid_of(claims[-1].detail["owner"]) != victim.pid, task_id

    # Every request was written by the process owning the task at that epoch.
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) >= TASKS * STEPS  # at least once; re-executions are allowed
    for line in lines:
        payload = line["payload"]
        owner = owner_at.get((line["task_id"], payload["epoch"]))
        assert owner is not None, f"a step was sent at an epoch nobody claimed: {line}"
        assert pid_of(owner) == payload["pid"], f"a step was written by a non-owner: {line}"
