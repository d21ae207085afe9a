"""Traffic: a visit per user, round after round, until Ctrl-C (or `--rounds N`).

Each round submits one `users.visit` task per user (`user-0` ... `user-N-1`),
waits until they end, and prints where each visit was written:

    round 7: user-0=users-db-1 user-1=users-db-2 ...

Ctrl-C (or SIGTERM) ends the run after the round in progress. A worker must
run the app elsewhere (`shepherd run --app users:app`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from shepherd import ShepherdError, Submission
from users import app

#: Seconds a round may take before the run stops (no worker, or a stuck one).
ROUND_TIMEOUT = 60.0


async def traffic(users: int, rounds: int | None) -> int:
    """Run the rounds; return how many ran."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    done = 0
    async with app:
        while not stop.is_set() and (rounds is None or done < rounds):
            done += 1
            visits = [
                Submission("users.visit", {"user": f"user-{n}", "round": done})
                for n in range(users)
            ]
            ids = await app.submit_many(visits)
            try:
                written = await asyncio.gather(*(app.result(i, timeout=ROUND_TIMEOUT) for i in ids))
            except TimeoutError:
                sys.exit(
                    f"round {done} did not end within {ROUND_TIMEOUT:g} s: "
                    "is a worker running? (shepherd run --app users:app)"
                )
            places = " ".join(f"{w['user']}={w['resource']}" for w in written)
            print(f"round {done}: {places}", flush=True)
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description="A visit per user, round after round.")
    parser.add_argument("--users", type=int, default=6, help="how many users (default 6)")
    parser.add_argument("--rounds", type=int, help="stop after this many rounds")
    options = parser.parse_args()
    try:
        done = asyncio.run(traffic(options.users, options.rounds))
    except ShepherdError as exc:
        sys.exit(f"error: {exc}")
    print(f"{done} rounds", flush=True)


if __name__ == "__main__":
    main()
