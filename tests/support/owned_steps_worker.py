"""A worker process for the tests of steps through exclusive owners, run as a real process.

Run as a script: `python owned_steps_worker.py STORE_URL --log PATH`. It runs the
scheduler, agent and supervisor roles of an app whose workflow `order` calls two
agents exclusive by `user`: `ledger` (one request at a time) and `ledger.batch`
(a batching agent). Each handling appends a `start` line before it works and an
`end` line after, with the process's pid, the agent, the user, the queue ids
of the requests it handles (a batch: all of them), and on a `start` line how
many of the user's requests queued before them still wait (`Earlier`), so
that a test can check from the log alone that no two handlings of one user
overlapped and that each user's requests were handled in the order queued. It
prints `ready <pid>` once its roles run. The test process builds the same app
with `build_app` to submit tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from shepherd import App
from shepherd.agents.helpers import source_of
from shepherd.governance.batch import Batch
from shepherd.store.sqlite import path_from_url

if TYPE_CHECKING:
    from shepherd import AgentRequest, WorkflowContext
    from shepherd.core.records import JsonValue

ONE, MANY = "ledger", "ledger.batch"
#: Seconds a handling works (the simulated service): handlings of one user would
#: overlap were they not kept apart.
PACE = 0.005


class Earlier:
    """Counts a key's requests queued before a given one and still in the queue.

    Queue ids rise in the order a key's requests are queued among the requests
    present (SQLite gives a new row the highest id plus one; PostgreSQL queues a
    key's requests one transaction at a time), so a request handled in order
    has none of its key's requests with a lower id left unanswered.
    """

    _COUNT = "SELECT count(*) FROM requests WHERE agent = {m} AND owner_key = {m} AND id < {m}"

    def __init__(self, store_url: str) -> None:
        self.sqlite = store_url.startswith("sqlite")
        if self.sqlite:
            self.conn: Any = sqlite3.connect(path_from_url(store_url), timeout=30)
        else:
            self.conn = psycopg.connect(store_url, autocommit=True)

    def count(self, agent: str, key: str, below: int) -> int:
        sql = self._COUNT.format(m="?" if self.sqlite else "%s")
        (n,) = self.conn.execute(sql, (agent, key, below)).fetchone()
        return int(n)


def build_app(store_url: str, *, log: Path | None = None) -> App:
    """The app on the shared store, with short windows, leases and polls."""
    app = App(
        store_url,
        poll_interval=0.05,
        idle_poll_max=0.2,
        supervisor_interval=0.2,
        lease_ttl=1.0,
        worker_beat=0.2,
        worker_ttl=1.0,
        owner_lease=2.0,
        sqlite_synchronous="NORMAL",
    )
    fd = None if log is None else os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    pid = os.getpid()
    earlier = Earlier(store_url) if log is not None else None

    def note(event: str, agent: str, requests: list[AgentRequest]) -> None:
        if fd is None or earlier is None:
            return
        user = str(requests[0].owner_key)
        ids = [source_of(r).id for r in requests]
        # Requests of the key queued before these and still unanswered: 0 when in order.
        waiting = earlier.count(agent, user, min(ids)) if event == "start" else 0
        line = f"{event} {pid} {agent} {user} {','.join(map(str, ids))} {waiting}\n"
        os.write(fd, line.encode())  # one write: atomic

    @app.agent(ONE, exclusive_by="user", within=30.0)
    async def ledger(request: AgentRequest) -> JsonValue:
        note("start", ONE, [request])
        await asyncio.sleep(PACE)
        note("end", ONE, [request])
        return {"n": request.payload["n"], "task": request.task_id}

    @app.agent(MANY, exclusive_by="user", within=30.0, batch=Batch(max_items=20, max_delay=0.01))
    async def ledger_batch(requests: list[AgentRequest]) -> list[JsonValue]:
        note("start", MANY, requests)
        await asyncio.sleep(PACE)
        note("end", MANY, requests)
        return [{"n": r.payload["n"], "task": r.task_id} for r in requests]

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> Any:
        one = await ctx.call(ONE, data)
        many = await ctx.call(MANY, data)
        return {"one": one, "many": many}

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="scheduler,agent,supervisor")
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    app = build_app(args.store, log=args.log)
    asyncio.run(
        app.run(args.roles.split(","), ready=lambda: print("ready", os.getpid(), flush=True))
    )


if __name__ == "__main__":
    main()
