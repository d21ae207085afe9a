"""A process that serves and makes durable calls (`app.call`) through governed agents.

Run as a script: `python governed_call_worker.py STORE_URL --roles agent --name NAME
--dir DIR`. It hosts four agents, each of which records what it does in a file
of DIR shared by every process (one short line per write, appended: lines of
different processes do not interleave, and their order in the file is the
order the writes happened in):

- `db.write` (resource `db`, capacity 2): `+ NAME` as its handling starts and
  `- NAME` as it ends, in `db.events`;
- `api.call` (resource `api`, 10 calls/s): the store clock's time as it
  starts, in `api.starts`;
- `pay` (a breaker on service `payments`): `NAME` in `pay.reached`, then it
  fails, transiently;
- `where`: answers the resolution of its call's entity (`request.resolution`).

Once its roles run it prints `ready <pid>`, waits for the file `DIR/go`, then
calls `db.write` and `api.call` many times at once and `where` with the entity
`user-1`, and writes what it got to `DIR/NAME.json`. The test process builds
the same app with `build_app` to declare the resources and make its own calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from shepherd import App, BreakerPolicy, RetryPolicy, TransientError
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd import AgentRequest
    from shepherd.core.records import JsonValue

#: The capacity-limited resource and its agent; the rate-limited one and its agent.
DB, DB_AGENT, CAPACITY = "db", "db.write", 2
API, API_AGENT, RATE = "api", "api.call", 10.0
#: The agent of a failing service, its breaker's service, and the failures that open it.
PAY, SERVICE, THRESHOLD = "pay", "payments", 3
#: The agent answering its call's resolution; the entity, its partition and resource.
WHERE, ENTITY, PARTITION, HOME = "where", "user-1", "p-eu", "eu-db"
#: Calls each process makes to `db.write` and to `api.call`.
DB_CALLS, API_CALLS = 8, 10
QUICK = RetryPolicy(max_attempts=10, initial_delay=0.01, max_delay=0.01)
PATIENCE = 60.0


def append(path: Path, line: str) -> None:
    """Append one line in one write (O_APPEND: it lands whole, after every earlier one)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def build_app(store_url: str, directory: Path, *, name: str = "caller") -> App:
    """An app on the shared store with short polls, its resources and agents declared."""
    app = App(
        store_url,
        poll_interval=0.05,
        idle_poll_max=0.2,
        sqlite_synchronous="NORMAL",
        # Few handlings per process, so that every process gets a share of the calls.
        agent_concurrency=4,
    )
    app.resource(DB, kind="sqlite", info={}, capacity=CAPACITY)
    app.resource(API, kind="http", info={}, rate=RATE)
    app.resource(HOME, kind="sqlite", info={"path": "eu.db"})

    @app.agent(DB_AGENT, resource=DB, within=30.0)
    async def write(request: AgentRequest) -> JsonValue:
        append(directory / "db.events", f"+ {name}")
        await asyncio.sleep(0.05)  # the database's own work, while others may try to start
        append(directory / "db.events", f"- {name}")
        return request.payload

    @app.agent(API_AGENT, resource=API, within=30.0)
    async def call_api(request: AgentRequest) -> JsonValue:
        append(directory / "api.starts", repr(app.store.now().timestamp()))
        return request.payload

    @app.agent(
        PAY,
        breaker=BreakerPolicy(failure_threshold=THRESHOLD, cool_down=600.0),
        service=SERVICE,
        retry=QUICK,
        within=30.0,
    )
    async def pay(request: AgentRequest) -> JsonValue:
        append(directory / "pay.reached", name)
        raise TransientError("the payment service is down")

    @app.agent(WHERE, within=30.0)
    async def where(request: AgentRequest) -> JsonValue:
        return None if request.resolution is None else request.resolution.to_json()

    return app


async def make_calls(app: App, directory: Path, name: str) -> None:
    """Once `go` exists: call the agents, many calls at once; write what came back."""
    go = directory / "go"
    await wait_until(go.exists, timeout=PATIENCE, message="the test never said go")
    db = [app.call(DB_AGENT, {"n": n}, timeout=PATIENCE) for n in range(DB_CALLS)]
    api = [app.call(API_AGENT, {"n": n}, timeout=PATIENCE) for n in range(API_CALLS)]
    answers = await asyncio.gather(*db, *api)
    where = await app.call(WHERE, {"who": name}, entity=ENTITY, timeout=PATIENCE)
    out = directory / f"{name}.json"
    out.with_suffix(".tmp").write_text(json.dumps({"answers": len(answers), "where": where}))
    out.with_suffix(".tmp").rename(out)


async def serve(app: App, directory: Path, name: str, roles: list[str]) -> None:
    running = asyncio.Event()

    def ready() -> None:
        print("ready", os.getpid(), flush=True)
        running.set()

    served = asyncio.create_task(app.run(roles, ready=ready))
    started = asyncio.create_task(running.wait())
    await asyncio.wait([served, started], return_when=asyncio.FIRST_COMPLETED)
    if served.done():
        served.result()  # the roles stopped before they ran: say why
    await make_calls(app, directory, name)
    await served


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent")
    parser.add_argument("--name", required=True)
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    app = build_app(args.store, args.dir, name=args.name)
    asyncio.run(serve(app, args.dir, args.name, args.roles.split(",")))


if __name__ == "__main__":
    main()
