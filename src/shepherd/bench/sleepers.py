"""sleepers: many tasks asleep at once (`ctx.sleep_until`): the idle worker's CPU, and wake-up lateness.

`n` tasks (default 10,000) are submitted; each workflow sleeps until its own
due time, spread evenly over `spread` seconds starting `lead` seconds after
the submit (time for every task to reach its sleep first). One process runs
every role and is otherwise idle: once every task is asleep, its CPU over the
rest of the lead is the worker's CPU while they sleep (a fraction of one core,
`time.process_time`). Each workflow, woken, records how late after its due
time it runs again (the wall clock of this process, which is the SQLite
store's clock; on PostgreSQL the server's must agree with it).

Run: `python -m shepherd.bench.sleepers [--n 10000] [--spread 10] [--lead 20] [--store URL]`.
It prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from shepherd import App, ProcessState, Submission
from shepherd.bench.measure import Spread

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

__all__ = ["main", "run_sleepers"]

#: Submissions per `submit_many`.
CHUNK = 1000


async def run_sleepers(store: str, *, n: int, spread: float, lead: float) -> dict[str, Any]:
    """Run the workload on `store`; its figures."""
    late: list[float] = []
    app = App(store, max_in_flight=5000)

    @app.workflow("sleeper")
    async def sleeper(ctx: WorkflowContext, data: Any) -> JsonValue:
        due = datetime.fromisoformat(data["due"])
        await ctx.sleep_until(due)
        late.append((datetime.now(UTC) - due).total_seconds())
        return None

    async with app, app.running():
        start = datetime.now(UTC) + timedelta(seconds=lead)
        ids: list[str] = []
        for first in range(0, n, CHUNK):
            dues = [
                start + timedelta(seconds=spread * i / n)
                for i in range(first, min(first + CHUNK, n))
            ]
            ids += await app.submit_many(
                [Submission("sleeper", {"due": d.isoformat()}) for d in dues]
            )
        asleep_after = time.monotonic()
        while True:  # every task has reached its sleep: pending, none claimed
            counts = await app.operations.count_tasks()
            if counts.get(ProcessState.PENDING, 0) == n and not counts.get(ProcessState.PROCESSING):
                break
            await asyncio.sleep(0.1)
        asleep_s = time.monotonic() - asleep_after
        idle_s = (start - datetime.now(UTC)).total_seconds() - 0.5
        cpu = None
        if idle_s > 1.0:
            began, cpu_began = time.monotonic(), time.process_time()
            await asyncio.sleep(idle_s)  # the measurement: the worker is left alone meanwhile
            cpu = (time.process_time() - cpu_began) / (time.monotonic() - began)
        for task_id in ids:
            await app.result(task_id, timeout=lead + spread + 600)
    lateness = Spread.of(late)
    return {
        "workload": "sleepers",
        "store": store.split(":", 1)[0],
        "n": n,
        "spread_s": spread,
        "all_asleep_after_s": round(asleep_s, 3),
        "idle_cpu_while_asleep": None if cpu is None else round(cpu, 4),
        "idle_measured_s": round(max(idle_s, 0.0), 1),
        "woken": lateness.n,
        "lateness_p50_s": round(lateness.p50_s, 3),
        "lateness_p99_s": round(lateness.p99_s, 3),
        "lateness_max_s": round(lateness.max_s, 3),
    }


def main(argv: list[str] | None = None) -> None:
    """The command line: run the workload once, print its figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m shepherd.bench.sleepers")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--spread", type=float, default=10.0)
    parser.add_argument("--lead", type=float, default=20.0)
    parser.add_argument("--store", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="shepherd-sleepers-") as tmp:
        store = args.store or f"sqlite:///{tmp}/sleepers.db"
        figures = asyncio.run(run_sleepers(store, n=args.n, spread=args.spread, lead=args.lead))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
