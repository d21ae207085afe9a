"""A transactional submit held open never stalls the others: work goes on in other processes.

One caller submits a task in its own transaction and keeps the transaction
open; meanwhile this process submits tasks one at a time and a worker PROCESS
(`support/worker_app.py`) claims, runs and finishes them. The stored
timestamps show they were created after the held submit and ended before its
commit; after the commit the held task runs too.
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from shepherd import App, UnknownTaskError
from shepherd.core.states import ProcessState
from support.processes import spawn_worker, workers
from support.worker_app import STEPS, build_app

#: Tasks the worker process must finish while the transaction is held, at least...
OTHERS = 20
#: ... and for at least this many seconds (the transaction stays open that long).
HOLD = 5.0


async def _database_now(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> datetime:
    cursor = await conn.execute("SELECT clock_timestamp()")
    row = await cursor.fetchone()
    assert row is not None
    (now,) = row
    assert isinstance(now, datetime)
    return now


async def _finish_others(app: App) -> list[str]:
    """Submit tasks one at a time, each awaited to its end, for OTHERS tasks and HOLD seconds."""
    done: list[str] = []
    started = time.monotonic()
    while len(done) < OTHERS or time.monotonic() - started < HOLD:
        task_id = await app.submit("chain", {"other": len(done)})
        result = await app.result(task_id, timeout=30)
        assert result == {"steps": STEPS, "input": {"other": len(done)}}
        done.append(task_id)
    return done


@pytest.mark.postgres
async def test_a_held_transactional_submit_does_not_stall_other_processes(
    postgres_url: str, tmp_path: Path
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as setup:
        await setup.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    with workers() as started:
        worker = spawn_worker(postgres_url, tmp_path, name="worker")
        started.append(worker)
        async with build_app(postgres_url) as app:
            async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
                await conn.execute("INSERT INTO orders (id) VALUES ('held')")
                held = await app.submit("chain", {"held": True}, key="held", connection=conn)

                others = await _finish_others(app)

                # Still inside the transaction: nobody sees the held task yet.
                with pytest.raises(UnknownTaskError):
                    await app.get_task(held)
                before_commit = await _database_now(conn)
                await conn.commit()

            assert await app.result(held, timeout=30) == {
                "steps": STEPS,
                "input": {"held": True},
            }
            held_task = await app.get_task(held)
            for task_id in others:
                task = await app.get_task(task_id)
                assert task.process_state is ProcessState.PROCESSED
                # Created after the held submit, ended before its commit.
                assert held_task.created_at < task.created_at
                assert task.updated_at < before_commit
                # By the worker process, not this one (which runs no role).
                request = task.steps[0].request
                assert isinstance(request, dict)
                assert request["pid"] == worker.pid
            last = await app.get_task(others[-1])
            assert (last.updated_at - held_task.created_at).total_seconds() >= HOLD * 0.9
        assert worker.alive(), worker.stderr()
