"""Stateless processors: each producer sends its events, one at a time, to the writer of their type.

Run as `python producers.py NAME --producers 50 --events 100` beside the
writer (`writer.py`): this process also runs the agent role, so it is one of
the writers. Each producer `NAME-i` sends `--events` events, the n-th of type
`type-(n % 8)`, with `app.call`, and appends each acknowledged event to
`acks-NAME.log` as `producer,seq,type,line` once its call has returned.
It runs the supervisor role too, whose leader (one process of all) queues
the reminders' ticks, and sets each type's reminder `flush` (every
`FLUSH_EVERY` seconds; each process sets the same ones, the last one wins).
SIGTERM or Ctrl-C stops it cleanly: its writers close their files and hand
their types back.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from writer import FLUSH_EVERY, app

TYPES = 8


async def produce(producer: str, events: int, acks: Path) -> None:
    for seq in range(events):
        kind = f"type-{seq % TYPES}"
        event = {"type": kind, "producer": producer, "seq": seq}
        line = await app.call("events.write", event, timeout=120.0)
        with acks.open("a") as out:  # one short line per write: appends do not interleave
            out.write(f"{producer},{seq},{kind},{line}\n")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--producers", type=int, default=50)
    parser.add_argument("--events", type=int, default=100)
    args = parser.parse_args()
    acks = Path(f"acks-{args.name}.log")
    ready = asyncio.Event()
    main_task = asyncio.current_task()
    assert main_task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
    async with app:
        roles = asyncio.create_task(app.run(["agent", "supervisor"], ready=ready.set))
        try:
            await ready.wait()
            for n in range(TYPES):  # the owner of each type flushes its buffer at each tick
                await app.remind("events.write", f"type-{n}", "flush", every=FLUSH_EVERY)
            print("ready", os.getpid(), flush=True)
            began = time.monotonic()
            producers = [
                produce(f"{args.name}-{i}", args.events, acks) for i in range(args.producers)
            ]
            await asyncio.gather(*producers)
            sent = args.producers * args.events
            took = time.monotonic() - began
            print(f"done: {sent} events acknowledged in {took:.1f} s", flush=True)
            await roles  # keep writing for the others until stopped
        finally:
            roles.cancel()  # the writers close their files and hand their types back
            await asyncio.gather(roles, return_exceptions=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        asyncio.run(main())
