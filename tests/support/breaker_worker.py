"""An agent process for the shared-breaker tests, run as a real worker process.

Run as a script: `python breaker_worker.py STORE_URL --roles agent --agent NAME
--url SERVICE_URL`. It hosts the one HTTP agent NAME, which calls the service
with the header `X-Worker: NAME` under the breaker of the service `payments`,
and prints `ready <pid>` once its roles run. The test process builds the same
agents with `register` (to schedule and supervise the workflows that call them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING, Any

from shepherd import App, BreakerPolicy, RetryPolicy
from shepherd.agents.http import http_agent

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

#: The remote service's name: every agent here shares its breaker.
SERVICE = "payments"
POLICY = BreakerPolicy(failure_threshold=3, cool_down=0.5)
#: Retries at once and (nearly) for ever: only the breaker holds calls back.
EAGER = RetryPolicy(max_attempts=1000, initial_delay=0.001, max_delay=0.002)


def build_app(store_url: str, *, breaker_refresh: float = 0.1) -> App:
    """An app on the shared store, with short polls so that the test runs quickly."""
    return App(
        store_url,
        supervisor_interval=0.1,
        poll_interval=0.05,
        lease_ttl=1.0,
        breaker_refresh=breaker_refresh,
        sqlite_synchronous="NORMAL",
    )


def register(app: App, agent: str, url: str) -> None:
    """Agent `agent` (calling `url` as `X-Worker: agent`) and workflow `pay_<agent>`."""
    http_agent(
        app,
        agent,
        "POST",
        url,
        within=30.0,
        retry=EAGER,
        headers={"X-Worker": agent},
        breaker=POLICY,
        service=SERVICE,
    )

    @app.workflow(f"pay_{agent}", complete_within=60.0)
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(agent, data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent")
    parser.add_argument("--agent", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--breaker-refresh", type=float, default=0.1)
    args = parser.parse_args()
    app = build_app(args.store, breaker_refresh=args.breaker_refresh)
    register(app, args.agent, args.url)
    roles = args.roles.split(",")
    asyncio.run(app.run(roles, ready=lambda: print("ready", os.getpid(), flush=True)))


if __name__ == "__main__":
    main()
