"""sleepers: many tasks asleep at once (`ctx.sleep_until`): the idle worker's CPU, and wake-up lateness.

`n` tasks (default 10,000) are submitted; each workflow sleeps until its own
due time, spread evenly over `spread` seconds starting `lead` seconds after
the submit (time for every task to reach its sleep first). One process runs
every role and is otherwise idle: once every task is asleep, its CPU over the
rest of the lead is the worker's CPU while they sleep (a fraction of one core,
`time.process_time`). Each workflow, woken, records how late after its due
time it runs again (the wall clock of this process, which is the SQLite
store's clock; on PostgreSQL the server's must agree with it).

Run: `shepherd bench --workloads sleepers [--sleepers-n 10000] [--sleepers-spread 10]
[--sleepers-lead 20] [--store URL] [--json]`; `python -m shepherd.bench.sleepers [--n ...]
[--spread ...] [--lead ...] [--store URL]` runs it alone and prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, final

from shepherd import App, ProcessState, Submission
from shepherd.bench.measure import Spread

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

__all__ = ["SleepersResult", "main", "run_sleepers"]

#: Submissions per `submit_many`.
CHUNK = 1000


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SleepersResult:
    """The sleepers workload's figures."""

    workload: str
    store: str
    n: int
    spread_s: float
    lead_s: float
    #: From the last submit until every task is asleep (pending, none claimed).
    all_asleep_after_s: float
    #: The idle worker's CPU while every task sleeps, a fraction of one core (None: no time left
    #: in the lead to measure it, at least 1 s is needed).
    idle_cpu_while_asleep: float | None
    idle_measured_s: float
    woken: int
    lateness_p50_s: float
    lateness_p99_s: float
    lateness_max_s: float

    @property
    def tasks_lost(self) -> int:
        """Tasks that did not wake (the bench exits 1)."""
        return self.n - self.woken


async def run_sleepers(
    store: str,
    *,
    n: int,
    spread: float,
    lead: float,
    budget: float = 600.0,
    settings: dict[str, Any] | None = None,
) -> SleepersResult:
    """Run the workload on `store`; its figures."""
    late: list[float] = []
    app = App(store, alerts=(), **{"max_in_flight": 5000, **(settings or {})})

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
            await app.result(task_id, timeout=lead + spread + budget)
    lateness = Spread.of(late)
    return SleepersResult(
        workload="sleepers",
        store=store.split(":", 1)[0],
        n=n,
        spread_s=spread,
        lead_s=lead,
        all_asleep_after_s=round(asleep_s, 3),
        idle_cpu_while_asleep=None if cpu is None else round(cpu, 4),
        idle_measured_s=round(max(idle_s, 0.0), 1) if cpu is not None else 0.0,
        woken=lateness.n,
        lateness_p50_s=round(lateness.p50_s, 3),
        lateness_p99_s=round(lateness.p99_s, 3),
        lateness_max_s=round(lateness.max_s, 3),
    )


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
    print(json.dumps({**asdict(figures), "tasks_lost": figures.tasks_lost}, indent=2))


if __name__ == "__main__":
    main()
