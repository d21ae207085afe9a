"""PostgreSQL rows: the records they become, and the column lists qualified for joins.

The column lists and their positions are `shepherd.store.rows`', shared with
SQLite, so both backends build their records the same way; instants come back
as aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from shepherd.store.rows import (
    EVENT_COLUMNS,
    LEASE_COLUMNS,
    OWNER_COLUMNS,
    STEP_COLUMNS,
    TASK_COLUMNS,
    Records,
    RequestCol,
    StepCol,
    TaskCol,
)

#: Why the owner of a claim (`tasks.locked_by`) or of a request (`requests.taken_by`)
#: is compared as `coalesce(column, '') = value` wherever the row's id is known:
#: no index serves that expression, so the planner finds the row by its id. The
#: partial indexes on those columns (for finding a dead worker's rows) look empty
#: to statistics taken while nothing was claimed (autovacuum's ANALYZE between
#: bursts), and a planner trusting them would scan a worker's whole claim, often
#: thousands of rows, for every row it joins: 10x slower W2 after one ANALYZE.
UNINDEXED_OWNER = "coalesce(column, '') = value"
#: Why a statement that joins a table to `unnest(...)` of many rows' keys also
#: says `key = ANY(ARRAY(SELECT key FROM v))`: the rows are then found through
#: the key's index whatever the statistics say. Joined to the unnest alone, a
#: planner that believes the table empty (statistics of a queue taken between
#: bursts) or the unnest a thousand rows long (a generic plan) scans the whole
#: table, for each row or into a hash: seconds once it holds a few thousand rows.
KEYED = "key = ANY(ARRAY(SELECT key FROM v))"

__all__ = [
    "EVENT_COLUMNS",
    "KEYED",
    "LEASE_COLUMNS",
    "OWNER_COLUMNS",
    "RECORDS",
    "REQUEST_COLUMNS_R",
    "STEP_COLUMNS",
    "STEP_COLUMNS_S",
    "TASK_COLUMNS",
    "TASK_COLUMNS_T",
    "TASK_WIDTH",
    "UNINDEXED_OWNER",
    "StepCol",
    "TaskCol",
    "columns",
    "event_from_row",
    "limit_of",
    "request_from_row",
    "step_from_row",
    "task_from_row",
    "utc",
]

#: The task columns qualified by the alias `t`, for statements that join.
TASK_COLUMNS_T = TaskCol.select("t")
STEP_COLUMNS_S = StepCol.select("s")
REQUEST_COLUMNS_R = RequestCol.select("r")
#: How many columns a task row has (a joined step's columns follow them).
TASK_WIDTH = len(TaskCol.names())


def columns(rows: Iterable[tuple[Any, ...]]) -> list[list[Any]]:
    """Rows as columns: the parameters of an `unnest(...)`."""
    return [list(column) for column in zip(*rows, strict=True)]


def limit_of(limit: int) -> int | None:
    """A LIMIT value: SQLite reads a negative limit as none, and so do we (NULL)."""
    return None if limit < 0 else limit


def utc(value: datetime) -> datetime:
    """The same instant with `datetime.UTC` as its zone, as the SQLite store returns it."""
    return value.astimezone(UTC)


#: Records from this store's rows (instants as timestamptz).
RECORDS = Records(utc)
task_from_row = RECORDS.task
step_from_row = RECORDS.step
request_from_row = RECORDS.request
event_from_row = RECORDS.event
