"""A step recovered after its scheduler process died keeps its recorded resolution: real processes.

A scheduler process starts a step for `user-1` (resolved to db1) and is
SIGKILLed while the agent, in the test's process, works on it. The entity then
moves to db2. The claim of the dead process expires, the supervisor resets the
task, and a second scheduler process sends the step again: with the recorded
resolution (db1), not the entity's new one. A step that starts after the move
goes to db2. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import AgentRequest, App, WorkflowContext
from shepherd.core.resources import Resolution, Resource
from support.processes import Worker, start_process, workers

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd.core.records import JsonValue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0

#: A process running only the scheduler role of the app below (the agent runs in the test).
SCHEDULER_PROCESS = """
import asyncio, os, sys

from shepherd import App


async def main(url):
    app = App(url, alerts=(), poll_interval=0.05, supervisor_interval=0.1, lease_ttl=1.0,
              sqlite_synchronous="NORMAL")

    @app.agent("write", within=1.0)
    async def write(request):
        raise AssertionError("this process runs no agent")

    @app.workflow("save", complete_within=5.0)
    async def save(ctx, data):
        return await ctx.call("write", data, entity=data["user"])

    await app.run(["scheduler"], ready=lambda: print(f"ready {os.getpid()}", flush=True))


asyncio.run(main(sys.argv[1]))
"""

DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"})
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})


def owner_pid(owner: str) -> int:
    """The pid inside a role instance name, `host:pid:suffix/role`."""
    return int(owner.split("/")[0].split(":")[1])


async def test_a_recovered_step_keeps_its_recorded_resolution(
    shared_store: str, tmp_path: Path
) -> None:
    script = tmp_path / "scheduler_process.py"
    script.write_text(SCHEDULER_PROCESS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}

    def scheduler(name: str) -> Worker:
        argv = [sys.executable, str(script), shared_store]
        return start_process(argv, tmp_path, name=name, env=env, ready_timeout=PATIENCE)

    here = App(
        shared_store,
        alerts=(),
        poll_interval=0.05,
        supervisor_interval=0.1,
        lease_ttl=1.0,
        sqlite_synchronous="NORMAL",
    )
    seen: list[tuple[str, int, Resolution | None]] = []
    first_attempt = asyncio.Event()

    @here.agent("write", within=1.0)
    async def write(request: AgentRequest) -> JsonValue:
        seen.append((request.payload["name"], request.attempt, request.resolution))
        if request.payload["name"] == "first" and request.attempt == 1:
            first_attempt.set()
            await asyncio.Event().wait()  # hangs: cancelled at complete_by
        return {"attempt": request.attempt}

    @here.workflow("save", complete_within=5.0)
    async def save(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("write", data, entity=data["user"])

    async with here:
        await here.store.add_resource(DB1)
        await here.store.add_resource(DB2)
        await here.store.move_partition("p1", "db1")
        await here.store.move_partition("p2", "db2")
        await here.store.assign_entity("user-1", "p1")
        with workers() as running:
            async with here.running(roles=["agent", "supervisor"]):
                dying = scheduler("dying")
                running.append(dying)
                task_id = await here.submit("save", {"name": "first", "user": "user-1"})
                await asyncio.wait_for(first_attempt.wait(), PATIENCE)
                dying.kill()
                await here.store.assign_entity("user-1", "p2")

                second = scheduler("second")
                running.append(second)
                assert await here.result(task_id, timeout=PATIENCE) == {"attempt": 2}
                later = await here.submit("save", {"name": "later", "user": "user-1"})
                assert await here.result(later, timeout=PATIENCE) == {"attempt": 1}

        task = await here.get_task(task_id)
        history = await here.history(task_id)

    on_db1 = Resolution(entity="user-1", partition="p1", resource=DB1)
    on_db2 = Resolution(entity="user-1", partition="p2", resource=DB2)
    assert seen == [("first", 1, on_db1), ("first", 2, on_db1), ("later", 1, on_db2)]
    assert [(s.attempt, s.resolution) for s in task.steps] == [(2, on_db1)]
    claims = [owner_pid(e.detail["owner"]) for e in history if e.kind == "claimed"]
    assert (claims[0], claims[-1]) == (dying.pid, second.pid)
    assert "reset" in [e.kind for e in history]
