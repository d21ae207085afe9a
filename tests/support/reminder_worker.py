"""A worker process for the test of reminders across a kill, run as a real process.

Run as a script: `python reminder_worker.py STORE_URL --log PATH`. It runs the
agent and supervisor roles of an app with one agent exclusive by `type`,
`writer`. Each handling appends a `start` line before it works and an `end`
line after: the process's pid, what it handles (`call` or the reminder's
name) and the reminder's tick (unix seconds; 0 for a plain call), so that a
test can check from the log alone that no two handlings of the key overlapped
and which ticks were handled where. A reminder's handling also adds its tick
to the key's owner state (`ticks`), which is committed with its answer. It
prints `ready <pid>` once its roles run. The test process builds the same app
with `build_app` to set reminders and send calls.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

from shepherd import App

if TYPE_CHECKING:
    from shepherd import AgentRequest
    from shepherd.core.records import JsonValue

AGENT = "writer"
#: Seconds a handling works: two handlings of the key would overlap were they not kept apart.
PACE = 0.02


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
        owner_lease=1.0,
        sqlite_synchronous="NORMAL",
    )
    fd = None if log is None else os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    pid = os.getpid()

    def note(event: str, request: AgentRequest) -> None:
        if fd is None:
            return
        tick = 0.0 if request.reminder_at is None else request.reminder_at.timestamp()
        os.write(fd, f"{event} {pid} {request.reminder or 'call'} {tick!r}\n".encode())

    @app.agent(AGENT, exclusive_by="type", within=10.0)
    async def writer(request: AgentRequest) -> JsonValue:
        note("start", request)
        await asyncio.sleep(PACE)
        if request.reminder_at is not None:
            state = request.owner_state if isinstance(request.owner_state, dict) else {}
            ticks = list(state.get("ticks") or [])
            request.owner_state = {"ticks": [*ticks, request.reminder_at.timestamp()]}
        note("end", request)
        return "written"

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent,supervisor")
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    app = build_app(args.store, log=args.log)
    asyncio.run(
        app.run(args.roles.split(","), ready=lambda: print("ready", os.getpid(), flush=True))
    )


if __name__ == "__main__":
    main()
