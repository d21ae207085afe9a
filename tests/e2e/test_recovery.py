"""Crash recovery and claim races with real worker processes sharing one SQLite file.

A worker is SIGKILLed mid-workflow (no clean-up runs in it): its claims, its
taken requests and its supervisor lease are left behind, and another process
must finish every task through `complete_by` expiry alone. Two schedulers racing
for the same tasks must never both own one. Steps may be *executed* more than
once; they must be *recorded* exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import ProcessState
from shepherd.testing import wait_until
from support.processes import spawn_worker, workers
from support.worker_app import STEPS, build_app

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd import App
    from shepherd.core.records import Event
    from support.processes import Worker

pytestmark = pytest.mark.slow

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0


async def all_events(app: App) -> list[Event]:
    events: list[Event] = []
    while batch := await app.store.read_events(
        reply_to=None, after_id=events[-1].id if events else 0, limit=10_000
    ):
        events += batch
    return events


async def processed(app: App) -> int:
    return (await app.store.count_tasks()).get(ProcessState.PROCESSED, 0)


def executions(log: Path) -> list[dict[str, Any]]:
    """The agent's execution log: one JSON object per handler call, from every process."""
    return [json.loads(line) for line in log.read_text().splitlines()]


def owner_pid(owner: str) -> int:
    """The pid inside a role instance name, `host:pid:suffix/role`."""
    return int(owner.split("/")[0].split(":")[1])


async def assert_recorded_exactly_once(app: App, ids: list[str]) -> list[Event]:
    """Every task processed with STEPS completed steps, each recorded by one event."""
    for task_id in ids:
        task = await app.get_task(task_id)
        assert task.process_state is ProcessState.PROCESSED, task
        assert [(s.seq, str(s.state)) for s in task.steps] == [
            (seq, "completed") for seq in range(1, STEPS + 1)
        ]
    events = await all_events(app)
    recorded = Counter((e.task_id, e.detail["seq"]) for e in events if e.kind == "step_completed")
    assert set(recorded) == {(t, seq) for t in ids for seq in range(1, STEPS + 1)}
    assert set(recorded.values()) == {1}, "a step was recorded completed twice"
    return events


async def test_a_killed_workers_tasks_are_finished_by_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    log = tmp_path / "executions.jsonl"
    tasks = 40
    async with build_app(url) as app:
        ids = list(await asyncio.gather(*(app.submit("chain", {"i": i}) for i in range(tasks))))

        async def half_the_first_steps_completed() -> bool:
            firsts = {
                e.task_id
                for e in await all_events(app)
                if e.kind == "step_completed" and e.detail["seq"] == 1
            }
            return len(firsts) >= tasks // 2

        with workers() as running:
            first = spawn_worker(
                url, tmp_path, name="first", log_path=log, pace=0.02, agent_concurrency=4
            )
            running.append(first)
            await wait_until(half_the_first_steps_completed, timeout=PATIENCE)
            first.kill()
            unfinished = [
                t.id
                for t in await app.list_tasks(limit=1000)
                if t.process_state is not ProcessState.PROCESSED
            ]
            assert unfinished, "the kill must land mid-workflow"

            second = spawn_worker(url, tmp_path, name="second", log_path=log)
            running.append(second)
            await wait_all_processed(app, tasks, running)

        events = await assert_recorded_exactly_once(app, ids)

    by_task: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_task[event.task_id].append(event)
    for task_id in unfinished:
        history = by_task[task_id]
        assert "reset" in [e.kind for e in history], f"{task_id} was finished without a reset"
        claims = [e for e in history if e.kind == "claimed"]
        assert owner_pid(claims[0].detail["owner"]) == first.pid
        assert owner_pid(claims[-1].detail["owner"]) == second.pid
    done = executions(log)
    assert len(done) >= tasks * STEPS  # at least once; re-executions are allowed


async def test_two_schedulers_racing_for_the_same_tasks_never_both_own_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    log = tmp_path / "executions.jsonl"
    tasks = 300
    async with build_app(url) as app:
        with workers() as running:
            for name in ("left", "right"):
                running.append(
                    spawn_worker(
                        url, tmp_path, name=name, log_path=log, claim_batch=8, max_in_flight=16
                    )
                )
            pids = {w.pid for w in running}
            # One task in ten hangs once: its claim expires, the supervisor resets it,
            # and either process may claim it again under a new epoch.
            ids = list(
                await asyncio.gather(
                    *(app.submit("chain", {"i": i, "hang": i % 10 == 0}) for i in range(tasks))
                )
            )
            await wait_all_processed(app, tasks, running)

        events = await assert_recorded_exactly_once(app, ids)

    owner_at: dict[tuple[str, int], str] = {}
    epochs: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event.kind != "claimed":
            continue
        key = (event.task_id, event.detail["lock_epoch"])
        assert key not in owner_at, f"two claims of task {key[0]} at lock_epoch {key[1]}"
        owner_at[key] = event.detail["owner"]
        epochs[event.task_id].append(event.detail["lock_epoch"])
    for task_id in ids:
        assert epochs[task_id] == sorted(set(epochs[task_id])), "epochs must only grow"
    assert {owner_pid(owner) for owner in owner_at.values()} <= pids
    reclaimed = {task_id for task_id, claimed in epochs.items() if len(claimed) > 1}
    assert {ids[i] for i in range(0, tasks, 10)} <= reclaimed

    # Every request was written by the process that owned the task at that epoch.
    for line in executions(log):
        payload = line["payload"]
        owner = owner_at.get((line["task_id"], payload["epoch"]))
        assert owner is not None, f"a step was sent at an epoch nobody claimed: {line}"
        assert owner_pid(owner) == payload["pid"], f"a step was written by a non-owner: {line}"


async def wait_all_processed(app: App, tasks: int, watched: list[Worker]) -> None:
    """Wait until `tasks` tasks are processed; on failure, show the workers' stderr."""

    async def done() -> bool:
        return await processed(app) == tasks

    try:
        await wait_until(done, timeout=PATIENCE)
    except AssertionError:
        logs = "".join(f"\n--- {w.name} stderr:\n{w.stderr()}" for w in watched)
        raise AssertionError(
            f"{await processed(app)} of {tasks} tasks processed in {PATIENCE} s{logs}"
        ) from None
