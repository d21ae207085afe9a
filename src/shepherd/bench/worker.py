"""A bench worker process: `python -m shepherd.bench.worker --store URL --roles scheduler,agent`.

It builds the bench App, runs the roles, prints `ready` once they have started,
and on SIGTERM/SIGINT stops gracefully and prints `stats {json}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys

from shepherd.bench.flow import build_app


def parse(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m shepherd.bench.worker")
    p.add_argument("--store", required=True)
    p.add_argument("--roles", default="scheduler,agent")
    p.add_argument("--sleep", type=float, default=0.010)
    p.add_argument("--within", type=float, default=None)
    p.add_argument("--complete-within", type=float, default=None)
    p.add_argument("--exec-log", default=None)
    p.add_argument("--synchronous", default="FULL")
    p.add_argument("--max-in-flight", type=int, default=5000)
    p.add_argument("--agent-concurrency", type=int, default=5000)
    p.add_argument("--claim-batch", type=int, default=256)
    p.add_argument("--supervisor-interval", type=float, default=0.5)
    return p.parse_args(args)


async def serve(opts: argparse.Namespace) -> None:
    app = build_app(
        opts.store,
        sleep=opts.sleep,
        within=opts.within,
        complete_within=opts.complete_within,
        exec_log=opts.exec_log,
        sqlite_synchronous=opts.synchronous,
        max_in_flight=opts.max_in_flight,
        agent_concurrency=opts.agent_concurrency,
        claim_batch=opts.claim_batch,
        supervisor_interval=opts.supervisor_interval,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    roles = [r for r in opts.roles.split(",") if r]
    async with app:
        job = asyncio.create_task(app.run(roles, ready=lambda: print("ready", flush=True)))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([job, stopping], return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        job.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job
        print("stats " + json.dumps(app.store.statistics()), flush=True)


def main(args: list[str] | None = None) -> int:
    asyncio.run(serve(parse(sys.argv[1:] if args is None else args)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
