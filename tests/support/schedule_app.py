"""A shepherd app with one schedule, run as a real worker process by the schedules' process test.

Run as a script: `python schedule_app.py STORE_URL`. It prints `ready <pid>`
once its scheduler and supervisor run. The schedule `beat` fires the workflow
`beat.log` every EVERY seconds, catching up every missed tick.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from shepherd import App, WorkflowContext

#: Seconds between the schedule's ticks.
EVERY = 0.25


def build_app(store_url: str) -> App:
    """The app, on `store_url`; the test process builds the same one to read the tasks."""
    app = App(
        store_url,
        supervisor_interval=0.05,
        poll_interval=0.05,
        lease_ttl=0.5,
        sqlite_synchronous="NORMAL",
    )

    @app.workflow("beat.log")
    async def log(ctx: WorkflowContext, data: Any) -> Any:
        return os.getpid()

    app.schedule("beat", workflow="beat.log", every=EVERY, catch_up="all", max_catch_up=100)
    return app


if __name__ == "__main__":
    app = build_app(sys.argv[1])
    ready = lambda: print("ready", os.getpid(), flush=True)  # noqa: E731
    asyncio.run(app.run(["scheduler", "supervisor"], ready=ready))
