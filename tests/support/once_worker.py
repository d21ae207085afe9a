"""An agent process for the done-key recovery tests, run as a real worker process.

Run as a script: `python once_worker.py STORE_URL --roles agent --url SERVICE_URL
[--hold 1]`. It hosts the agent `charge`, which POSTs one charge to the service
inside `request.once(...)` and returns the service's answer, and prints `ready
<pid>` once its roles run. With `--hold 1`, after the charge is recorded and
before replying, it tells the service (`POST /held`) and blocks: the test
SIGKILLs it there. The test process builds the same app with `register` (to
schedule and supervise the workflow that calls the agent).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import TYPE_CHECKING, Any

import httpx

from shepherd import App

if TYPE_CHECKING:
    from shepherd import AgentRequest, WorkflowContext
    from shepherd.core.records import JsonValue

#: The agent's step window in seconds: long enough to be killed inside it.
WITHIN = 3.0


def build_app(store_url: str) -> App:
    """An app on the shared store, with short polls so that the test runs quickly."""
    return App(
        store_url,
        supervisor_interval=0.1,
        poll_interval=0.05,
        lease_ttl=1.0,
        sqlite_synchronous="NORMAL",
    )


def register(app: App, url: str, *, hold: bool = False) -> None:
    """Agent `charge` (calling the service at `url`) and workflow `pay`."""

    @app.agent("charge", within=WITHIN)
    async def charge(request: AgentRequest) -> JsonValue:
        headers = {"Idempotency-Key": request.idempotency_key, "X-Worker": str(os.getpid())}
        async with httpx.AsyncClient(base_url=url, timeout=30.0) as client:

            async def effect() -> JsonValue:
                answer = await client.post("/charges", json=request.payload, headers=headers)
                answer.raise_for_status()
                result: JsonValue = answer.json()
                return result

            result = await request.once(effect)
            if hold:
                await client.post("/held", json={"result": result}, headers=headers)
                await asyncio.Event().wait()  # killed here, before replying
        return result

    @app.workflow("pay", complete_within=60.0, max_failures=10)
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        # A charge that may have happened (OutcomeUnknownError) sends the task to
        # `error` for the operator, not to compensation.
        return await ctx.call("charge", data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent")
    parser.add_argument("--url", required=True)
    parser.add_argument("--hold", type=int, default=0)
    args = parser.parse_args()
    app = build_app(args.store)
    register(app, args.url, hold=bool(args.hold))
    roles = args.roles.split(",")
    asyncio.run(app.run(roles, ready=lambda: print("ready", os.getpid(), flush=True)))


if __name__ == "__main__":
    main()
