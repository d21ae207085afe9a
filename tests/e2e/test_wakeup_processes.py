"""Wake-ups across processes: a submit wakes a worker elsewhere, its end wakes `app.result` here.

Every process polls once an hour (`poll_interval=3600`), so only a pushed
wake-up can finish these tests before their deadline: datagrams between the
processes sharing a SQLite file, LISTEN/NOTIFY on PostgreSQL.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from shepherd.store.sqlite import SQLiteStore
from support.processes import spawn_worker, workers
from support.worker_app import STEPS, build_app

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.slow

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 30.0
#: Polls are an hour apart: a test that passes was woken.
NO_POLLING = 3600.0


async def test_a_worker_elsewhere_is_woken_and_wakes_the_waiting_caller(
    shared_store: str, tmp_path: Path
) -> None:
    with workers() as started:
        started.append(
            spawn_worker(
                shared_store,
                tmp_path,
                name="worker",
                roles="scheduler,agent",
                poll_interval=NO_POLLING,
            )
        )
        async with build_app(shared_store, poll_interval=NO_POLLING) as app:
            for i in range(3):  # each one submitted after the worker went back to waiting
                task_id = await app.submit("chain", {"i": i})
                result = await app.result(task_id, timeout=PATIENCE)
                assert result == {"steps": STEPS, "input": {"i": i}}


async def test_a_killed_process_socket_is_removed_and_wake_ups_go_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    async with build_app(url, poll_interval=NO_POLLING) as app:
        assert isinstance(app.store, SQLiteStore)
        folder = app.store.wakeups.folder
        with workers() as started:
            doomed = spawn_worker(
                url, tmp_path, name="doomed", roles="scheduler,agent", poll_interval=NO_POLLING
            )
            started.append(doomed)
            doomed.kill()  # SIGKILL: no clean-up runs
            left = [name for name in os.listdir(folder) if name.startswith(f"{doomed.pid}-")]
            assert left, "a SIGKILLed process leaves its socket behind"

            # The commit is announced to the dead socket, which refuses: it is removed.
            first = await app.submit("chain", {"i": 0})
            assert not set(left) & set(os.listdir(folder))

            started.append(
                spawn_worker(
                    url, tmp_path, name="worker", roles="scheduler,agent", poll_interval=NO_POLLING
                )
            )
            for i, task_id in enumerate([first, await app.submit("chain", {"i": 1})]):
                result = await app.result(task_id, timeout=PATIENCE)
                assert result == {"steps": STEPS, "input": {"i": i}}
