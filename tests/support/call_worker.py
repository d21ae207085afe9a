"""An agent process for the `app.call` tests, run as a real worker process.

Run as a script: `python call_worker.py STORE_URL --roles agent --name NAME --log PATH`.
It hosts the agent `calls.hang`: each handling appends `NAME ATTEMPT` to the
log file as a line; the first handling of a call then hangs (it stands for a
process about to die), later ones answer with who handled the call. It
prints `ready <pid>` once its roles run. The test process builds the same app
with `build_app` to make the calls.
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

AGENT = "calls.hang"


def build_app(store_url: str, *, name: str = "caller", log: Path | None = None) -> App:
    """An app on the shared store with short polls, and the agent `calls.hang`."""
    app = App(store_url, poll_interval=0.05, idle_poll_max=0.2, sqlite_synchronous="NORMAL")

    @app.agent(AGENT)
    async def hang(request: AgentRequest) -> JsonValue:
        if log is not None:
            with log.open("a") as out:  # one short line per write: appends do not interleave
                out.write(f"{name} {request.attempt}\n")
        if request.attempt == 1:
            await asyncio.Event().wait()
        return {"by": name, "attempt": request.attempt}

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--roles", default="agent")
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", type=Path, required=True)
    args = parser.parse_args()
    app = build_app(args.store, name=args.name, log=args.log)
    roles = args.roles.split(",")
    asyncio.run(app.run(roles, ready=lambda: print("ready", os.getpid(), flush=True)))


if __name__ == "__main__":
    main()
