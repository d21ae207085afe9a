"""Store transactions, counted by the store: `statistics()["commits"]`, here and in a worker apart.

Each store counts the commits of its writer: every write transaction (a
group-commit batch, or a lone write committed on its own), on SQLite and on
PostgreSQL alike. Reads are not counted: on SQLite they take no write
transaction, and on PostgreSQL they run on the read pool, not the writer.

A worker in another process (`shepherd.bench.apart_app`, `shepherd.bench.worker`)
is asked for its counters with SIGUSR1: it writes its store's statistics, as
JSON, to the file named by `STATS_FILE` in its environment. The bench takes
such a snapshot before and after a phase, so that the worker's start and stop
are not counted in the phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from shepherd.app import App

#: The environment variable naming the file a worker writes its statistics to on SIGUSR1.
STATS_FILE = "SHEPHERD_BENCH_STATS_FILE"
#: Seconds a worker has to answer SIGUSR1.
ANSWER_WITHIN = 10.0


def commits(stats: dict[str, float]) -> float:
    """The commits in a store's statistics (0 when there are none, as from a dead worker)."""
    return float(stats.get("commits", 0))


def per(count: float, workflows: int) -> float:
    """`count` per workflow (NaN for none)."""
    return count / workflows if workflows else float("nan")


class Snapshots(Protocol):
    """A worker apart that can be asked for its store's counters (`crash.Worker`)."""

    async def snapshot(self) -> dict[str, float]: ...


async def commits_now(app: App, worker: Snapshots | None = None) -> float:
    """The commits of `app`'s store so far, plus those of `worker`'s (asked now), if given."""
    here = commits(app.store.statistics())
    return here if worker is None else here + commits(await worker.snapshot())


def answer_on_signal(app: App) -> None:
    """On SIGUSR1, write `app.store.statistics()` to the file `STATS_FILE` names (if it does).

    The handler runs on the main thread between two bytecodes; it reads a few
    counters and replaces the file at once (written aside, then renamed), so a
    reader never sees half of it.
    """
    path = os.environ.get(STATS_FILE)
    if not path:
        return

    def write(_signum: int, _frame: object) -> None:
        aside = f"{path}.partial"
        with open(aside, "w") as out:
            json.dump(app.store.statistics(), out)
        os.replace(aside, path)

    signal.signal(signal.SIGUSR1, write)


async def snapshot(pid: int, path: Path, *, within: float = ANSWER_WITHIN) -> dict[str, float]:
    """Ask the worker `pid` for its store's statistics (SIGUSR1); {} if it does not answer.

    Polls for the file every millisecond until `within` s have passed.
    """
    if not _ask(pid, path):
        return {}
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        stats = _answer(path)
        if stats is not None:
            return stats
        await asyncio.sleep(0.001)  # a poll of the worker's answer, with a deadline
    return {}


def _ask(pid: int, path: Path) -> bool:
    """Remove the last answer and signal the worker; whether it still runs."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        return False
    return True


def _answer(path: Path) -> dict[str, float] | None:
    """The worker's answer, once written (it appears whole: renamed into place)."""
    try:
        stats: dict[str, float] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return stats


__all__ = [
    "ANSWER_WITHIN",
    "STATS_FILE",
    "Snapshots",
    "answer_on_signal",
    "commits",
    "commits_now",
    "per",
    "snapshot",
]
