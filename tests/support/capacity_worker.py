"""An agent process for the capacity and rate tests, run as a real worker process.

Run as a script: `python capacity_worker.py STORE_URL --roles agent --url URL
--name NAME [--slot-lease S] [--log PATH]`. It hosts the HTTP agent
`orders.write`, which calls the service with the header `X-Worker: NAME` while
holding a slot of the resource `orders-db`, and the agent `api.call`, limited
by the rate of the resource `api`, which appends its start time (unix seconds)
to the log file as a line; it prints `ready <pid>` once its roles run. The test
process builds the same app with `build_app` and `register` (to declare the
resources, and to schedule and supervise the workflows that call the agents).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shepherd import AgentRequest, App, RetryPolicy
from shepherd.agents.http import http_agent

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

RESOURCE = "orders-db"
AGENT = "orders.write"
WORKFLOW = "write"
#: The rate-limited resource, its agent and workflow.
API, API_AGENT, API_WORKFLOW = "api", "api.call", "call"
QUICK = RetryPolicy(max_attempts=1000, initial_delay=0.01, max_delay=0.05)


def build_app(
    store_url: str, *, capacity: int = 3, slot_lease: float = 15.0, rate: float = 10.0
) -> App:
    """An app on the shared store with short polls, and the resources declared."""
    app = App(
        store_url,
        supervisor_interval=0.2,
        poll_interval=0.05,
        lease_ttl=1.0,
        slot_lease=slot_lease,
        # Few handlers per process, so that every process gets a share of the calls.
        agent_concurrency=4,
        sqlite_synchronous="NORMAL",
    )
    app.resource(RESOURCE, kind="http", info={}, capacity=capacity)
    app.resource(API, kind="http", info={}, rate=rate)
    return app


def register(
    app: App, url: str, *, name: str, within: float = 60.0, log: Path | None = None
) -> None:
    """Agents `orders.write` (calling `url` as `X-Worker: name`) and `api.call`
    (logging its start times to `log`), and their workflows `write` and `call`."""
    http_agent(
        app,
        AGENT,
        "POST",
        url,
        within=within,
        retry=QUICK,
        headers={"X-Worker": name},
        resource=RESOURCE,
    )

    @app.workflow(WORKFLOW, complete_within=120.0)
    async def write(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(AGENT, data)

    @app.agent(API_AGENT, resource=API, within=within, retry=QUICK)
    async def call_api(request: AgentRequest) -> JsonValue:
        if log is not None:
            with log.open("a") as out:  # one short line per write: appends do not interleave
                out.write(f"{time.time()!r}\n")
        return request.payload

    @app.workflow(API_WORKFLOW, complete_within=120.0)
    async def call(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(API_AGENT, data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent")
    parser.add_argument("--url", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--slot-lease", type=float, default=15.0)
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args()
    app = build_app(args.store, slot_lease=args.slot_lease)
    register(app, args.url, name=args.name, log=args.log)
    roles = args.roles.split(",")
    asyncio.run(app.run(roles, ready=lambda: print("ready", os.getpid(), flush=True)))


if __name__ == "__main__":
    main()
