"""A small shepherd app run as a real worker process by the recovery tests.

Run as a script: `python worker_app.py STORE_URL --roles scheduler,agent --log FILE`.
It prints `ready <pid>` once its roles run. The workflow `chain` calls the agent
`work` STEPS times; each request carries the scheduler's pid and lock_epoch, and
every execution of the agent appends one JSON line to the log file, so a test
can tell who wrote which step at which epoch. A task submitted with
`{"hang": true}` hangs in the first attempt of its step 2, past `complete_by`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

#: Steps of the `chain` workflow.
STEPS = 3


def build_app(
    store_url: str,
    *,
    log_path: str | None = None,
    pace: float = 0.0,
    claim_batch: int = 256,
    max_in_flight: int = 10000,
    agent_concurrency: int = 1000,
    supervisor_interval: float = 0.1,
    poll_interval: float = 0.05,
) -> App:
    """The app, on `store_url`; the test process builds the same one to submit tasks.

    Args:
        store_url: The shared store.
        log_path: Where the agent appends one line per execution (None: nowhere).
        pace: Seconds each agent execution takes (the simulated remote service).
        claim_batch: Tasks claimed per transaction.
        max_in_flight: Workflows running at once in this process.
        agent_concurrency: Agent handlers running at once in this process.
        supervisor_interval: Seconds between supervisor scans (the lease lasts
            max(1 s, 3 intervals) unrenewed).
        poll_interval: Seconds between the roles' fallback polls.
    """
    app = App(
        store_url,
        supervisor_interval=supervisor_interval,
        poll_interval=poll_interval,
        lease_ttl=1.0,
        claim_batch=claim_batch,
        max_in_flight=max_in_flight,
        agent_concurrency=agent_concurrency,
        sqlite_synchronous="NORMAL",
    )
    log_fd = None if log_path is None else os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    @app.agent("work", within=1.0)
    async def work(request: AgentRequest) -> Any:
        if log_fd is not None:
            line = {
                "pid": os.getpid(),
                "task_id": request.task_id,
                "seq": request.seq,
                "attempt": request.attempt,
                "payload": request.payload,
            }
            os.write(log_fd, (json.dumps(line) + "\n").encode())  # one write: one whole line
        if pace:
            await asyncio.sleep(pace)  # the remote service's latency
        if request.payload.get("hang") and request.attempt == 1:
            await asyncio.Event().wait()  # cancelled at complete_by
        return {"seq": request.seq}

    @app.workflow("chain", complete_within=2.0, max_failures=10)
    async def chain(ctx: WorkflowContext, data: Any) -> Any:
        done = []
        hang = isinstance(data, dict) and bool(data.get("hang"))
        for n in range(1, STEPS + 1):
            payload = {"n": n, "epoch": ctx.epoch, "pid": os.getpid(), "hang": hang and n == 2}
            done.append(await ctx.call("work", payload))
        return {"steps": len(done), "input": data}

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="scheduler,agent,supervisor")
    parser.add_argument("--log")
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--claim-batch", type=int, default=256)
    parser.add_argument("--max-in-flight", type=int, default=10000)
    parser.add_argument("--agent-concurrency", type=int, default=1000)
    parser.add_argument("--supervisor-interval", type=float, default=0.1)
    parser.add_argument("--poll-interval", type=float, default=0.05)
    args = parser.parse_args()
    app = build_app(
        args.store,
        log_path=args.log,
        pace=args.pace,
        claim_batch=args.claim_batch,
        max_in_flight=args.max_in_flight,
        agent_concurrency=args.agent_concurrency,
        supervisor_interval=args.supervisor_interval,
        poll_interval=args.poll_interval,
    )
    roles = args.roles.split(",")
    asyncio.run(app.run(roles, ready=lambda: print("ready", os.getpid(), flush=True)))


if __name__ == "__main__":
    main()
