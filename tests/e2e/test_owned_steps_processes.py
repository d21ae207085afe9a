"""Steps through exclusive owners across real processes, one of them SIGKILLed while it owns users.

Three processes run every role of `support.owned_steps_worker`; 200 tasks over 5
users each call `ledger` (exclusive by user) and then `ledger.batch` (the same,
batching). Once handlings flow, a process that owns users is SIGKILLed.

What must hold, read from the handlers' log (the order of its lines, not
times): no two handlings of one user's requests of one agent overlapped, but
for the dead process's last ones, cut by the kill; each user's requests were
handled in the order they were queued (when one is handled, none of its
user's requests queued before it still waits); the batching
agent got lists, and each step's reply is its own item's result; every task
ends `processed` with `failure_count` 0, its steps finished under the owners
that took the dead process's users over.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path

import pytest

from shepherd import Submission
from shepherd.core.states import ProcessState
from shepherd.testing import wait_until
from support import owned_steps_worker
from support.files import written_lines
from support.owned_steps_worker import MANY, ONE, build_app
from support.processes import spawn_worker, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PATIENCE = 120.0
SCRIPT = Path(owned_steps_worker.__file__)
USERS = [f"user-{n}" for n in range(5)]
TASKS = 200


def events(log: Path) -> list[tuple[str, int, str, str, list[int], int]]:
    """(event, pid, agent, user, request ids, requests of the user queued before them and
    still waiting) of every line so far; a kill line has no ids."""
    out: list[tuple[str, int, str, str, list[int], int]] = []
    for line in written_lines(log):
        event, pid, *rest = line.split()
        if event == "kill":
            out.append((event, int(pid), "", "", [], 0))
        else:
            agent, user, ids, waiting = rest
            out.append(
                (event, int(pid), agent, user, [int(i) for i in ids.split(",")], int(waiting))
            )
    return out


def check_handlings(log: Path, victim: int) -> dict[str, list[int]]:
    """Assert one handling at a time per (agent, user), in queue order; each agent's batch sizes.

    A handling the kill cut (the victim's, never ended) counts as ended at the
    kill line; after it, nothing of the victim's may appear.
    """
    open_: dict[tuple[str, str], tuple[int, list[int]]] = {}
    sizes: dict[str, list[int]] = defaultdict(list)
    killed = False
    for event, pid, agent, user, ids, waiting in events(log):
        if event == "kill":
            killed = True
            for key in [k for k, (p, _) in open_.items() if p == victim]:
                del open_[key]
            continue
        assert not (killed and pid == victim), "the dead process handled after the kill"
        key = (agent, user)
        if event == "start":
            assert key not in open_, f"{key}: {ids} started while {open_[key]} ran"
            open_[key] = (pid, ids)
            sizes[agent].append(len(ids))
            # In queue order: none of the user's requests queued earlier still waits.
            assert ids == sorted(ids), ids
            assert waiting == 0, f"{key}: {ids} handled before {waiting} queued earlier"
        else:
            assert open_.pop(key) == (pid, ids)
    assert killed
    return sizes


async def test_steps_through_owners_run_one_at_a_time_in_order_across_a_kill(
    shared_store: str, tmp_path: Path
) -> None:
    log = tmp_path / "handlings.log"
    app = build_app(shared_store)
    async with app:
        with workers() as running:
            for name in ("a", "b", "c"):
                running.append(
                    spawn_worker(shared_store, tmp_path, name=name, script=SCRIPT, log_path=log)
                )
            ids = await app.submit_many(
                [Submission("order", {"user": USERS[n % 5], "n": n}) for n in range(TASKS)]
            )
            await wait_until(
                lambda: len(events(log)) >= 60, timeout=PATIENCE, message="no handlings"
            )
            pids = {w.pid: w for w in running}

            async def owner_of_users() -> int | None:
                leases = await app.store.list_key_leases(ONE)
                leases += await app.store.list_key_leases(MANY)
                now = app.store.now()
                for lease in leases:
                    for pid in pids:
                        if f":{pid}:" in lease.owner and lease.live(now):
                            return pid
                return None

            async def has_owner() -> bool:
                return await owner_of_users() is not None

            victim = None
            while victim is None:
                await wait_until(has_owner, timeout=PATIENCE, message="no owner")
                victim = await owner_of_users()
            pids[victim].kill()
            with log.open("a") as out:
                out.write(f"kill {victim}\n")

            results = [await app.result(i, timeout=PATIENCE) for i in ids]
            tasks = await asyncio.gather(*(app.store.get_task(i) for i in ids))

    sizes = check_handlings(log, victim)
    assert max(sizes[MANY]) > 1, "the batching agent never got more than one request"
    for n, (task_id, result) in enumerate(zip(ids, results, strict=True)):
        assert result == {
            "one": {"n": n, "task": task_id},
            "many": {"n": n, "task": task_id},
        }
    assert all(t is not None and t.process_state is ProcessState.PROCESSED for t in tasks)
    assert [t.failure_count for t in tasks if t is not None] == [0] * TASKS
