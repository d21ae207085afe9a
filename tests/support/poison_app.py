"""A small app for the poison-isolation tests, run by real worker processes.

    PYTHONPATH=tests python -m shepherd run --app support.poison_app:app --store URL

The workflow `chain3` calls the agent `work` three times (`complete_within=3`,
each step `within=2`, the default `max_failures=3`); each healthy execution
takes about 0.1 s. The supervisor scans every 0.2 s and the roles poll every
0.05 s: after each crash the suspects run apart, one at a time in a process,
so the run lasts about as long as they take. A task whose input is
`{"poison": true}` kills the process that runs its first step (`os._exit(1)`),
every time; one whose input is `{"block": true}` blocks the event loop of that
process for 5 s (`time.sleep(5)` in an async handler), every time.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from shepherd import AgentRequest, App, WorkflowContext

__all__ = ["WORKFLOW", "app", "build_app"]

WORKFLOW = "chain3"


def build_app(store: str | None = None) -> App:
    """The app; the test process builds the same one to submit tasks."""
    app = App(store, alerts=(), supervisor_interval=0.2, poll_interval=0.05)

    @app.agent("work")
    async def work(request: AgentRequest) -> Any:
        if isinstance(request.payload, dict) and request.payload.get("poison"):
            os._exit(1)  # a poison task: the process dies mid-step
        if isinstance(request.payload, dict) and request.payload.get("block"):
            time.sleep(5)  # noqa: ASYNC251 - the blocking handler under test
        await asyncio.sleep(0.1)
        return {"n": request.payload}

    @app.workflow(WORKFLOW, complete_within=3)
    async def chain3(ctx: WorkflowContext, data: Any) -> Any:
        flags = data if isinstance(data, dict) else {}
        payload = {"poison": bool(flags.get("poison")), "block": bool(flags.get("block"))}
        return [await ctx.call("work", {"n": n, **payload}, within=2) for n in range(1, 4)]

    return app


app = build_app()
