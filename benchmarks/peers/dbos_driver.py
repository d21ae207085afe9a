"""DBOS Transact on the workloads of shepherd's bench that it can run: W1 queued, lone.

The peer's side of `scripts/peer-bench`, which runs it in a virtualenv of its
own (`.peer-venv/`, with `dbos` installed there and nowhere else) beside
`python -m shepherd.bench`, so that both are measured on one machine in one
hour. shepherd never imports this file, nor do its tests.

    python dbos_driver.py run --db URL [--n 2000] [--lone-n 200] [--queue-lone-n 20]
                              [--enqueue loop|gather]
    python dbos_driver.py worker --db URL        # started by `run`

`run` prints one JSON document on stdout:

- `W1`: a worker process (`worker`: `DBOS.launch()` and a queue) is started
  and ready; then this process, a `DBOSClient`, enqueues N workflows of three
  no-op steps (one after the other, or `--enqueue gather`: a thousand gathered
  at a time, as shepherd's client submits) and polls until all have ended. workflows/s is N over the
  client's clock from the first enqueue to the poll that saw the last one end,
  as shepherd's W1apart times it.
- `lone`: in this process, `DBOS.start_workflow` + `get_result` of the same
  workflow, one at a time (`direct`); then the same through the queue
  (`queue.enqueue` + `get_result`, `queued`), which is paced by DBOS's polling.

Everything is written as the DBOS documentation shows a user writing it, with
DBOS's defaults; each choice that could move a figure says why it is so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sqlite3
import subprocess
import sys
import threading
import time
from importlib.metadata import version
from typing import Any

from dbos import DBOS, DBOSClient, EnqueueOptions

#: The application's name: the worker's config and the client's enqueues name the same one,
#: so the worker dequeues what the client enqueued.
APP = "peer-bench"
#: The queue W1 and the queued lone rounds go through.
QUEUE = "bench"
#: The workflow's registered name, which the client enqueues by.
WORKFLOW = "bench"
STEPS = 3
#: Enqueues in flight at once with `--enqueue gather`: shepherd's W1apart submits a thousand
#: at a time.
CHUNK = 1000
#: Seconds between two polls of the workflows' states (shepherd's W1apart: 20 ms).
POLL = 0.02


@DBOS.step()
def noop(payload: dict[str, Any]) -> dict[str, Any]:
    """A step that returns its input: shepherd's `noop` agent.

    A synchronous step and workflow: the form DBOS's documentation leads with.
    """
    return payload


@DBOS.workflow(name=WORKFLOW)
def bench(payload: dict[str, Any]) -> dict[str, Any]:
    """Three sequential no-op steps, each one's output the next one's input, as in shepherd's."""
    for _ in range(STEPS):
        payload = noop(payload)
    return payload


def configure(db: str) -> None:
    """Create the DBOS instance on system database `db` (a PostgreSQL or a sqlite:/// URL).

    Defaults throughout (pool size, LISTEN/NOTIFY on PostgreSQL, SQLite's own journal
    mode): what a user gets. Logs at WARNING so that no per-workflow line is printed.
    """
    DBOS(config={"name": APP, "system_database_url": db, "log_level": "WARNING"})


def register_queue(worker_concurrency: int | None = None) -> Any:
    """The queue, with DBOS's defaults: a poll every second, no concurrency limit unless given.

    In DBOS 3.4 a queue is declared with `DBOS.register_queue` once DBOS is launched
    (its configuration lives in the system database). Without a limit, each poll starts
    every workflow waiting, each on a thread of its own that needs a connection of the
    pool (20 by default); `--worker-concurrency` caps how many run at once in the worker.
    """
    return DBOS.register_queue(QUEUE, worker_concurrency=worker_concurrency)


# --- the worker process -----------------------------------------------------------------


def worker(db: str, worker_concurrency: int | None) -> None:
    """Launch DBOS with the queue, say `ready`, and run until stdin closes."""
    configure(db)
    DBOS.launch()
    register_queue(worker_concurrency)
    # DBOS starts a queue's worker thread within a second of the queue's registration; the
    # client starts once it runs, as shepherd's client starts once its worker is ready.
    deadline = time.monotonic() + 30
    while not any(t.name == f"queue-worker-{QUEUE}" for t in threading.enumerate()):
        if time.monotonic() > deadline:
            raise SystemExit("dbos_driver worker: the queue's thread did not start within 30 s")
        time.sleep(0.01)
    print("ready", flush=True)
    sys.stdin.read()
    DBOS.destroy()


# --- the client: W1 ---------------------------------------------------------------------


class Ended:
    """Counts the workflows that ended in the system database, on one connection of its own.

    The harness's own poll, one count, as shepherd's bench counts its tasks' states: a
    `list_workflows` of every row each 20 ms would load the database far more. The
    connection stays open across polls, as shepherd's store keeps its own.
    """

    QUERY = (
        "SELECT count(*) FILTER (WHERE status = 'SUCCESS'),"
        " count(*) FILTER (WHERE status IN ('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED'))"
        " FROM {table}"
    )

    def __init__(self, db: str) -> None:
        self.conn: Any
        if db.startswith("sqlite"):
            self.conn = sqlite3.connect(db.removeprefix("sqlite:///"), isolation_level=None)
            self.query = self.QUERY.format(table="workflow_status")
        else:
            import psycopg

            self.conn = psycopg.connect(db, autocommit=True)
            self.query = self.QUERY.format(table="dbos.workflow_status")

    def __call__(self) -> tuple[int, int]:
        """(workflows that succeeded, that ended otherwise)."""
        row = self.conn.execute(self.query).fetchone()
        return int(row[0] or 0), int(row[1] or 0)

    def close(self) -> None:
        self.conn.close()


OPTIONS: EnqueueOptions = {"queue_name": QUEUE, "workflow_name": WORKFLOW}


def _loop_all(client: DBOSClient, n: int) -> None:
    """Enqueue `n` workflows one after the other (the default, `--enqueue loop`).

    The form DBOS's documentation shows for many workflows, a loop of `enqueue`; each is
    its own transaction, since DBOS has no call that enqueues many at once.
    """
    for i in range(n):
        client.enqueue(OPTIONS, {"i": i})


async def _gather_all(client: DBOSClient, n: int) -> None:
    """Enqueue `n` workflows `CHUNK` at a time, gathered (`--enqueue gather`).

    As shepherd's client submits: here the client's `enqueue_async` calls run on threads
    and share its connection pool (DBOS's default size). On SQLite this is the slower of
    the two (the enqueues contend for the one file lock with each other and the worker).
    """
    for start in range(0, n, CHUNK):
        await asyncio.gather(
            *(client.enqueue_async(OPTIONS, {"i": i}) for i in range(start, min(n, start + CHUNK)))
        )


def w1(
    db: str, n: int, budget: float, enqueue: str, worker_concurrency: int | None
) -> dict[str, Any]:
    """W1 queued: a worker process apart, this process enqueues `n` and polls until all ended."""
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "worker", "--db", db]
        + ([] if worker_concurrency is None else ["--worker-concurrency", str(worker_concurrency)]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdin is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"dbos_driver: the worker did not start (it said {line!r})")
        client = DBOSClient(system_database_url=db, application_name=APP)
        ended = Ended(db)
        try:
            began = time.perf_counter()
            if enqueue == "gather":
                asyncio.run(_gather_all(client, n))
            else:
                _loop_all(client, n)
            submit_s = time.perf_counter() - began
            deadline = time.monotonic() + budget
            ok, failed = ended()
            while ok + failed < n and time.monotonic() < deadline:
                time.sleep(POLL)
                ok, failed = ended()
            total_s = time.perf_counter() - began
        finally:
            ended.close()
            client.destroy()
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {
        "n": n,
        "enqueue": enqueue,
        "worker_concurrency": worker_concurrency,
        "submit_s": submit_s,
        "total_s": total_s,
        "workflows_per_s": ok / total_s if total_s > 0 else math.nan,
        "processed": ok,
        "failed": failed,
        "lost": n - ok - failed,
    }


# --- lone, in this process --------------------------------------------------------------


def spread(values: list[float]) -> dict[str, float]:
    """n, mean, nearest-rank p50 and p99, max, in seconds: the same as shepherd's bench."""

    def rank(q: float) -> float:
        ordered = sorted(values)
        return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]

    if not values:
        return {"n": 0, "mean_s": math.nan, "p50_s": math.nan, "p99_s": math.nan, "max_s": math.nan}
    return {
        "n": len(values),
        "mean_s": sum(values) / len(values),
        "p50_s": rank(50),
        "p99_s": rank(99),
        "max_s": max(values),
    }


def lone(db: str, n: int, queue_n: int) -> dict[str, Any]:
    """One workflow at a time in this process: `n` started directly, then `queue_n` queued."""
    configure(db)
    DBOS.launch()
    queue = register_queue()
    try:
        direct: list[float] = []
        for i in range(n):
            began = time.perf_counter()
            # The in-process start: DBOS runs the workflow on a thread of this process and
            # the handle's result comes from that thread's future, not from a poll.
            DBOS.start_workflow(bench, {"i": i}).get_result()
            direct.append(time.perf_counter() - began)
        queued: list[float] = []
        for i in range(queue_n):
            began = time.perf_counter()
            # Through the queue: the queue's thread dequeues on its poll (every second by
            # default) and the handle polls for the result (every second by default).
            queue.enqueue(bench, {"i": i}).get_result()
            queued.append(time.perf_counter() - began)
    finally:
        DBOS.destroy()
    return {"direct": spread(direct), "queued": spread(queued)}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run `worker` or `run`."""
    parser = argparse.ArgumentParser(prog="dbos_driver", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a DBOS worker process (started by `run`)")
    w.add_argument("--db", required=True)
    w.add_argument("--worker-concurrency", type=int, default=None)
    r = sub.add_parser("run", help="W1 queued and lone; one JSON document on stdout")
    r.add_argument(
        "--db", required=True, help="system database: postgresql://... or sqlite:///PATH"
    )
    r.add_argument("--n", type=int, default=2000, help="W1's workflows")
    r.add_argument("--lone-n", type=int, default=200, help="lone rounds started directly")
    r.add_argument("--queue-lone-n", type=int, default=20, help="lone rounds through the queue")
    r.add_argument(
        "--enqueue",
        choices=("loop", "gather"),
        default="loop",
        help="W1's enqueues: one after the other, or a thousand gathered at a time",
    )
    r.add_argument(
        "--worker-concurrency",
        type=int,
        default=None,
        help="the queue's worker_concurrency in W1's worker (default: none, DBOS's default)",
    )
    r.add_argument("--budget", type=float, default=600.0, help="W1's seconds at most")
    args = parser.parse_args(argv)
    if args.command == "worker":
        worker(args.db, args.worker_concurrency)
        return 0
    figures: dict[str, Any] = {
        "peer": "dbos",
        "version": version("dbos"),
        "python": platform.python_version(),
        "backend": "sqlite" if args.db.startswith("sqlite") else "postgresql",
        "load_average": os.getloadavg(),
        "W1": w1(args.db, args.n, args.budget, args.enqueue, args.worker_concurrency),
        "lone": lone(args.db, args.lone_n, args.queue_lone_n),
    }
    json.dump(figures, sys.stdout, indent=2)
    print()
    return 1 if figures["W1"]["lost"] or figures["W1"]["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
