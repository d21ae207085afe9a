"""A bench worker process: `python -m shepherd.bench.worker --store URL --roles scheduler,agent`.

It builds the bench App, runs the roles, prints `ready` once they have started,
and on SIGTERM/SIGINT stops gracefully and prints `stats {json}`; on SIGUSR1
it writes its store's counters where the bench asks (`shepherd.bench.counts`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from typing import Any

import click

from shepherd.bench.counts import answer_on_signal
from shepherd.bench.flow import build_app


async def serve(store: str, roles: str, **settings: Any) -> None:
    """Run `roles` of the bench App over `store` until SIGTERM or SIGINT."""
    app = build_app(store, **settings)
    answer_on_signal(app)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with app:
        job = asyncio.create_task(
            app.run([r for r in roles.split(",") if r], ready=lambda: print("ready", flush=True))
        )
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([job, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job
        print("stats " + json.dumps(app.store.statistics()), flush=True)


@click.command()
@click.option("--store", required=True, metavar="URL")
@click.option("--roles", default="scheduler,agent", show_default=True)
@click.option("--sleep", type=float, default=0.010, show_default=True)
@click.option("--within", type=float, default=None)
@click.option("--complete-within", type=float, default=None)
@click.option("--exec-log", "exec_log", default=None, metavar="PATH")
@click.option("--synchronous", "sqlite_synchronous", default="FULL", show_default=True)
@click.option("--max-in-flight", type=int, default=5000, show_default=True)
@click.option("--agent-concurrency", type=int, default=5000, show_default=True)
@click.option("--claim-batch", type=int, default=256, show_default=True)
@click.option("--supervisor-interval", type=float, default=0.5, show_default=True)
def main(store: str, roles: str, **settings: Any) -> None:
    """Run the bench App's roles until SIGTERM or SIGINT; print `ready`, then `stats {json}`."""
    asyncio.run(serve(store, roles, **settings))


if __name__ == "__main__":
    main(prog_name="python -m shepherd.bench.worker")
