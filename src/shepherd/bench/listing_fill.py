"""Fill a store with many tasks at once, for the task list benchmark (`shepherd.bench.listing`).

The rows are written straight into the `tasks` table (SQLite: one
`executemany` transaction; PostgreSQL: `COPY`), after the App has opened the
store and applied its migrations, so every index the listing uses is there
and maintained as the rows go in. The tasks look like a month of production:
created evenly over `span`, ids made as `new_task_id` makes them (time, then
random), states and workflows skewed (most `processed`, 1% in `error`; one
busy workflow, one rare), half with a business key; those in `error` or
`compensated` hold an error with a reason and a traceback, which the list's
reason column reads. Nothing runs them.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from shepherd.core.states import ProcessState

__all__ = ["STATES", "WORKFLOWS", "Filled", "fill", "rows"]

#: (state, weight): what share of the tasks ends up in each state.
STATES = (
    (ProcessState.PROCESSED, 900),
    (ProcessState.COMPENSATED, 30),
    (ProcessState.PENDING, 25),
    (ProcessState.CANCELLED, 15),
    (ProcessState.ERROR, 10),
    (ProcessState.PROCESSING, 10),
    (ProcessState.COMPENSATING, 10),
)
#: (workflow, weight): one busy workflow, a few middling ones, one rare.
WORKFLOWS = (
    ("orders.process", 600),
    ("payments.refund", 200),
    ("users.sync", 150),
    ("reports.build", 49),
    ("audit.rare", 1),
)
_COLUMNS = (
    "id, workflow, key, input, process_state, locked_by, lock_epoch, complete_by, "
    "complete_within, failure_count, not_before, cancel_requested, created_at, updated_at, error"
)
#: The failure a task that ended badly holds: a reason and a traceback, as a failed step leaves.
_FAILED = frozenset({ProcessState.ERROR, ProcessState.COMPENSATED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Filled:
    """What `fill` wrote: how many tasks, and one of them in the middle (for lookups)."""

    tasks: int
    middle_id: str
    middle_key: str
    first_at: datetime
    last_at: datetime


def rows(n: int, *, end: datetime, span: timedelta, seed: int = 15) -> Iterator[tuple[object, ...]]:
    """`n` task rows, oldest first, created evenly over the `span` before `end`.

    Times are aware datetimes; a backend converts them (`fill`).
    """
    rng = random.Random(seed)
    states = rng.choices([s for s, _ in STATES], [w for _, w in STATES], k=n)
    flows = rng.choices([f for f, _ in WORKFLOWS], [w for _, w in WORKFLOWS], k=n)
    step = span / max(n, 1)
    start = end - span
    for i in range(n):
        at = start + step * i
        state = states[i]
        owned = state is ProcessState.PROCESSING
        ended = state not in (ProcessState.PENDING, ProcessState.PROCESSING)
        task_id = f"{int(at.timestamp() * 1000):012x}{rng.getrandbits(32):08x}"
        yield (
            task_id,
            flows[i],
            f"order-{i}" if i % 2 == 0 else None,
            f'{{"n":{i}}}',
            str(state),
            "bench" if owned else None,
            1 if owned else 0,
            end + timedelta(days=1) if owned else None,
            30.0,
            0,
            at,
            False,
            at,
            at + timedelta(seconds=rng.uniform(0.01, 5.0)) if ended else at,
            _error(i) if state in _FAILED else None,
        )


def _error(i: int) -> str:
    """A failed task's error, as JSON text: a reason on one line, then a traceback."""
    return json.dumps(
        {
            "reason": f"card of order-{i} declined twice (gateway 502)\nafter 3 tries",
            "type": "PermanentError",
            "traceback": "Traceback (most recent call last):\n" + '  File "shop.py", line 42\n' * 8,
        }
    )


def fill(url: str, n: int, *, end: datetime, span: timedelta) -> Filled:
    """Write `n` task rows into the (migrated) store at `url`; what was written."""
    middle: tuple[object, ...] = ()
    middle_at = n // 2

    def tracked() -> Iterator[tuple[object, ...]]:
        nonlocal middle
        for i, row in enumerate(rows(n, end=end, span=span)):
            if i == middle_at:
                middle = row
            yield row

    if url.startswith("sqlite:"):
        _fill_sqlite(url, tracked())
    else:
        _fill_postgres(url, tracked())
    return Filled(
        tasks=n,
        middle_id=str(middle[0]),
        middle_key=f"order-{middle_at - middle_at % 2}",
        first_at=end - span,
        last_at=end,
    )


def _fill_sqlite(url: str, source: Iterator[tuple[object, ...]]) -> None:
    path = url[len("sqlite://") :].removeprefix("/")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN IMMEDIATE")
        marks = ", ".join(["?"] * len(_COLUMNS.split(", ")))
        conn.executemany(
            f"INSERT INTO tasks ({_COLUMNS}) VALUES ({marks})",
            (tuple(_unix(v) for v in row) for row in source),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _unix(value: object) -> object:
    return value.timestamp() if isinstance(value, datetime) else value


def _fill_postgres(url: str, source: Iterator[tuple[object, ...]]) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=False) as conn:
        with conn.cursor() as cur, cur.copy(f"COPY tasks ({_COLUMNS}) FROM STDIN") as copy:
            for row in source:
                copy.write_row(row)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE tasks")
