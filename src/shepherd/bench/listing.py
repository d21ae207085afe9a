"""The task list on a big store: `python -m shepherd.bench.listing --tasks 1000000 [--store URL]`.

Fills a fresh store with `--tasks` tasks (`listing_fill`: bulk rows, a month
of them), then times a page of the task list as the dashboard reads it, for
each filter: `App.list_tasks`, each task's failure reason on one line (the
reason column), and how many tasks the filter matches
(`count_matching`: exact up to 10,000, then "10,000+"). Each filter's first
page, and the page `--depth` pages deep (reached by the keyset cursor, page
after page, untimed; then timed), is read `--repeat` times; the figures are
the median and the worst of those reads, in milliseconds, and the count
alone is timed too. The overview's reads (`count_tasks`, `throughput`) are
timed the same way. The store must be empty: a SQLite file that does not
exist yet, or an empty PostgreSQL database.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from shepherd.app import App
from shepherd.bench.listing_fill import Filled, fill
from shepherd.bench.measure import percentile
from shepherd.console.runner import reason
from shepherd.core.bulk import TaskCount
from shepherd.core.records import Task
from shepherd.core.states import ProcessState
from shepherd.store.cursor import TaskCursor

__all__ = ["Timing", "filters", "main", "measure", "run"]

PAGE = 50
#: A month of tasks.
SPAN = timedelta(days=30)


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """One filter's pages: milliseconds of the first page and of the deep one (median, worst)."""

    name: str
    first_p50_ms: float
    first_max_ms: float
    #: None when fewer pages match than the depth asked.
    deep_p50_ms: float | None
    deep_max_ms: float | None
    #: How many tasks the first page held.
    rows: int
    #: The count alone (median, worst), and the count shown (`10,000+` past the cap).
    count_p50_ms: float | None = None
    count_max_ms: float | None = None
    count: str = ""


def filters(filled: Filled) -> dict[str, dict[str, Any]]:
    """The dashboard's filters, by name, as `list_tasks` keyword arguments."""
    day = filled.first_at + timedelta(days=10)
    return {
        "no filter": {},
        "state=processed": {"states": [ProcessState.PROCESSED]},
        "state=error": {"states": [ProcessState.ERROR]},
        "state=error,compensating": {"states": [ProcessState.ERROR, ProcessState.COMPENSATING]},
        "workflow (busy)": {"workflow": "orders.process"},
        "workflow (rare)": {"workflow": "audit.rare"},
        "workflow+state=error": {"workflow": "orders.process", "states": [ProcessState.ERROR]},
        "key": {"key": filled.middle_key},
        "key+state=processed": {"key": filled.middle_key, "states": [ProcessState.PROCESSED]},
        "id prefix (3)": {"id_prefix": filled.middle_id[:3]},
        "id prefix (3)+workflow": {"id_prefix": filled.middle_id[:3], "workflow": "orders.process"},
        "id prefix (6)": {"id_prefix": filled.middle_id[:6]},
        "id prefix (8)": {"id_prefix": filled.middle_id[:8]},
        "id prefix (12)": {"id_prefix": filled.middle_id[:12]},
        "id (20)": {"id_prefix": filled.middle_id},
        "id prefix (12)+workflow": {
            "id_prefix": filled.middle_id[:12],
            "workflow": "orders.process",
        },
        "created in one day": {"created_from": day, "created_to": day + timedelta(days=1)},
        "one day+state=error": {
            "created_from": day,
            "created_to": day + timedelta(days=1),
            "states": [ProcessState.ERROR],
        },
    }


async def _timed(work: Callable[[], Awaitable[object]], repeat: int) -> tuple[list[float], Any]:
    """Milliseconds of each of `repeat` runs of `work`, and its last outcome."""
    spent = []
    out: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = await work()
        spent.append((time.perf_counter() - start) * 1000)
    return spent, out


async def measure(app: App, filled: Filled, *, depth: int, repeat: int) -> list[Timing]:
    """Time every filter's first page and its page `depth` deep, then the overview's reads."""
    out = []
    ops = app.operations
    for name, given in filters(filled).items():
        first, (page, _) = await _timed(_page(app, given, None), repeat)
        rows = len(page)
        counted, count = await _timed(functools.partial(ops.count_matching, **given), repeat)
        cursor = None
        pages = 1
        while pages < depth and len(page) == PAGE:
            cursor = TaskCursor.of(page[-1])
            page = await app.list_tasks(limit=PAGE, before=cursor, **given)
            pages += 1
        deep: list[float] | None = None
        if pages == depth and cursor is not None and page:
            deep, _ = await _timed(_page(app, given, cursor), repeat)
        out.append(_timing(name, first, deep, rows=rows, counted=(counted, count)))
    for name, read in (("count_tasks", ops.count_tasks), ("throughput (1h)", ops.throughput)):
        spent, _ = await _timed(read, repeat)
        out.append(_timing(name, spent, None, rows=0))
    return out


def _page(
    app: App, given: dict[str, Any], before: TaskCursor | None
) -> Callable[[], Awaitable[tuple[list[Task], TaskCount]]]:
    """A read of one page of the filter `given` after `before`, as the list shows it.

    The page's tasks, each one's reason on one line, and the filter's count.
    """

    async def read() -> tuple[list[Task], TaskCount]:
        page = await app.list_tasks(limit=PAGE, before=before, **given)
        for task in page:
            _reason_line(task)
        return page, await app.operations.count_matching(**given)

    return read


def _reason_line(task: Task) -> str:
    """What the list's reason column shows: the first line of the reason, cut to 100 characters."""
    error = task.error
    if isinstance(error, dict) and isinstance(error.get("reason"), str):
        error = str(error["reason"]).splitlines()[0]
    return reason(error)[:100]


def _timing(
    name: str,
    first: list[float],
    deep: list[float] | None,
    *,
    rows: int,
    counted: tuple[list[float], TaskCount] | None = None,
) -> Timing:
    return Timing(
        name=name,
        first_p50_ms=round(percentile(first, 50), 2),
        first_max_ms=round(max(first), 2),
        deep_p50_ms=None if deep is None else round(percentile(deep, 50), 2),
        deep_max_ms=None if deep is None else round(max(deep), 2),
        rows=rows,
        count_p50_ms=None if counted is None else round(percentile(counted[0], 50), 2),
        count_max_ms=None if counted is None else round(max(counted[0]), 2),
        count="" if counted is None else counted[1].shown(),
    )


async def run(url: str, *, tasks: int, depth: int, repeat: int) -> tuple[float, list[Timing]]:
    """Fill the store at `url` (migrated by an App first) and time it: (fill seconds, timings)."""
    app = App(url, alerts=())
    async with app:
        if sum((await app.operations.count_tasks()).values()):
            raise SystemExit(f"the store at {url} holds tasks already: give an empty one")
        end = app.store.now()
    start = time.perf_counter()
    filled = await asyncio.to_thread(fill, url, tasks, end=end, span=SPAN)
    spent = time.perf_counter() - start
    app = App(url, alerts=())
    async with app:
        return spent, await measure(app, filled, depth=depth, repeat=repeat)


def report(timings: list[Timing]) -> str:
    """The timings as a Markdown table (ms: median / worst)."""

    def pair(p50: float | None, worst: float | None) -> str:
        return "—" if p50 is None else f"{p50:.1f} / {worst:.1f}"

    lines = [
        "| read | first page + count (ms, median / worst) | 50 pages deep + count (ms) "
        "| count alone (ms) | rows | count |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for t in timings:
        first = pair(t.first_p50_ms, t.first_max_ms)
        deep = pair(t.deep_p50_ms, t.deep_max_ms)
        counted = pair(t.count_p50_ms, t.count_max_ms)
        lines.append(f"| {t.name} | {first} | {deep} | {counted} | {t.rows} | {t.count} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m shepherd.bench.listing")
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--store", help="an empty store (default: a new SQLite file)")
    parser.add_argument("--depth", type=int, default=50, help="the deep page's number")
    parser.add_argument("--repeat", type=int, default=20, help="reads of each page")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.depth < 2 or args.repeat < 1:
        parser.error("--tasks and --repeat must be at least 1, --depth at least 2")
    with tempfile.TemporaryDirectory() as folder:
        url = args.store or f"sqlite:///{os.path.join(folder, 'listing.db')}"
        spent, timings = asyncio.run(
            run(url, tasks=args.tasks, depth=args.depth, repeat=args.repeat)
        )
    if args.json:
        print(json.dumps({"fill_s": round(spent, 1), "timings": [asdict(t) for t in timings]}))
    else:
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        print(f"{args.tasks} tasks filled in {spent:.1f} s ({when}); page size {PAGE}")
        print(report(timings))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
