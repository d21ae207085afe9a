"""signal: signal delivery latency, the sender in another process (`app.signal` → `ctx.wait_for`).

This process runs a scheduler; each of `n` workflows, one at a time, waits
for signal `go` (its task pending, unowned, holding no claim). Once it waits,
a sender process (`python -m shepherd.bench.signal_latency --send STORE`,
started once and kept) is handed the task's id on its stdin and sends the
signal, its payload the wall-clock instant just before its `app.signal` call.
The workflow, resumed, records the wall clock minus that instant: the latency
from the signal sent to the workflow running on (both processes on one
machine share the wall clock). The first `warm_up` are not counted.

Run: `shepherd bench --workloads signal [--signal-n 200] [--store URL] [--json]`;
`python -m shepherd.bench.signal_latency [--n 200] [--store URL]` runs it alone
and prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, final

from shepherd import App, ProcessState
from shepherd.bench.measure import Spread
from shepherd.core.states import StepKind, StepState

if TYPE_CHECKING:
    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue

__all__ = ["SignalResult", "main", "run_signal"]

#: Deliveries not counted at the start (connections, caches, the sender's first open).
WARM_UP = 10


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class SignalResult:
    """The signal workload's figures."""

    workload: str
    store: str
    n: int
    delivered: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    #: The sender process's exit status when it died before the end, else None.
    worker_exit: int | None

    @property
    def tasks_lost(self) -> int:
        """Waits that never got their signal (the bench exits 1)."""
        return self.n - self.delivered


async def run_signal(
    store: str, *, n: int, budget: float = 600.0, settings: dict[str, Any] | None = None
) -> SignalResult:
    """Run the workload on `store`; its figures."""
    latencies: list[float] = []
    resumed = asyncio.Event()
    app = App(store, alerts=(), **(settings or {}))

    @app.workflow("waiter")
    async def waiter(ctx: WorkflowContext, data: Any) -> JsonValue:
        got = await ctx.wait_for("go")
        assert isinstance(got, dict)
        latencies.append(time.time() - float(got["sent_at"]))
        resumed.set()
        return None

    sender = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "shepherd.bench.signal_latency",
        "--send",
        store,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert sender.stdin is not None
    assert sender.stdout is not None
    try:
        async with app, app.running(["scheduler"]), asyncio.timeout(budget):
            for _ in range(WARM_UP + n):
                resumed.clear()
                task_id = await app.submit("waiter", {})
                while not _waiting(await app.get_task(task_id)):  # noqa: ASYNC110 - polls the store
                    await asyncio.sleep(0.002)
                sender.stdin.write(f"{task_id}\n".encode())
                await sender.stdin.drain()
                await resumed.wait()
                await sender.stdout.readline()  # its `sent`, so that none is left unread
        sender.stdin.close()
        await sender.wait()
    finally:
        if sender.returncode is None:
            sender.kill()
            await sender.wait()
    counted = Spread.of(latencies[WARM_UP:])
    return SignalResult(
        workload="signal",
        store=store.split(":", 1)[0],
        n=n,
        delivered=counted.n,
        latency_p50_ms=round(counted.p50_s * 1000, 2),
        latency_p99_ms=round(counted.p99_s * 1000, 2),
        latency_max_ms=round(counted.max_s * 1000, 2),
        worker_exit=sender.returncode or None,
    )


def _waiting(task: Any) -> bool:
    return task.process_state is ProcessState.PENDING and any(
        s.kind is StepKind.SIGNAL and s.state is StepState.RUNNING for s in task.steps
    )


async def _send(store: str) -> None:
    """The sender: for each task id read from stdin, send it signal `go`, then say `sent`."""
    loop = asyncio.get_running_loop()
    async with App(store, alerts=()) as app:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            await app.signal(line.strip(), "go", {"sent_at": time.time()})
            print("sent", flush=True)


def main(argv: list[str] | None = None) -> None:
    """The command line: run the workload once and print its figures as JSON (or be its sender)."""
    parser = argparse.ArgumentParser(prog="python -m shepherd.bench.signal_latency")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--store", default=None)
    parser.add_argument("--send", metavar="STORE", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.send is not None:
        asyncio.run(_send(args.send))
        return
    with tempfile.TemporaryDirectory(prefix="shepherd-signal-") as tmp:
        store = args.store or f"sqlite:///{tmp}/signal.db"
        figures = asyncio.run(run_signal(store, n=args.n))
    print(json.dumps({**asdict(figures), "tasks_lost": figures.tasks_lost}, indent=2))


if __name__ == "__main__":
    main()
