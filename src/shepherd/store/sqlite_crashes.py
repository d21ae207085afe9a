"""SQLite: crash attribution — which tasks a dead process held, and the supervisor's verdicts.

Handlers run inside the store's group-commit transaction
(`handler(store, conn, items, now, rings)`, one outcome per item); reads get
the connection and the store's clock (unix seconds).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shepherd.core.supervision import Escalate, Reset
from shepherd.store import signals as ch
from shepherd.store.rows import task_from_row, unix_instant
from shepherd.store.worker_rows import WORKER_COLUMNS, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.records import Lease, Task
    from shepherd.core.workers import Worker
    from shepherd.store.sqlite import SQLiteStore

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

#: Rows of processes not stopped and not yet attributed: the live and the newly dead.
_UNREAPED = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE stopped_at IS NULL AND reaped_at IS NULL "
    "ORDER BY instance"
)
_MARK_DIED = (
    "UPDATE workers SET died_at = ? WHERE instance = ? AND stopped_at IS NULL AND died_at IS NULL"
)
_REAP = "UPDATE workers SET reaped_at = ? WHERE instance = ?"
_CRASHED_AT = "UPDATE tasks SET crashes = ?, owner_deaths = ?, updated_at = ?"
_LEADS = "SELECT holder, epoch, expires_at FROM leases WHERE name = ?"


def leads(conn: sqlite3.Connection, leader: Lease, now: float) -> bool:
    """Whether `leader` still holds its lease, with the same epoch, unexpired at `now`."""
    lease = conn.execute(_LEADS, (leader.name,)).fetchone()
    return (
        lease is not None
        and (lease[0], lease[1]) == (leader.holder, leader.epoch)
        and (lease[2] > now)
    )


def unreaped_workers(conn: sqlite3.Connection) -> list[Worker]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    return [worker_from_row(row, unix_instant) for row in conn.execute(_UNREAPED)]


def crash_victims(
    conn: sqlite3.Connection, task_columns: str, instance: str, beat_at: float
) -> list[tuple[Task, bool, int | None]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held.

    A request counts as running in `instance` if its agent took it and its
    complete_by was still ahead at the process's last beat.
    """
    owner, agent = f"{instance}/s", f"{instance}/a"
    running = dict(
        conn.execute(
            "SELECT task_id, min(seq) FROM requests WHERE taken_by = ? AND complete_by > ? "
            "GROUP BY task_id",
            (agent, beat_at),
        ).fetchall()
    )
    rows = conn.execute(
        f"SELECT {task_columns} FROM tasks WHERE process_state IN ('processing', 'compensating') "
        "AND locked_by IS NOT NULL AND (locked_by = ? OR id IN "
        "(SELECT task_id FROM requests WHERE taken_by = ? AND complete_by > ?)) ORDER BY id",
        (owner, agent, beat_at),
    ).fetchall()
    return [
        (task_from_row(row, unix_instant), row[7] == owner, running.get(row[0])) for row in rows
    ]


def mark_died(
    store: SQLiteStore, conn: sqlite3.Connection, items: list[str], now: float, rings: set[str]
) -> list[object]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    return [conn.execute(_MARK_DIED, (now, instance)).rowcount == 1 for instance in items]


def reap_worker(
    store: SQLiteStore, conn: sqlite3.Connection, items: list[str], now: float, rings: set[str]
) -> list[object]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    for instance in items:
        conn.execute(_REAP, (now, instance))
    return [None] * len(items)


def apply_crash(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[Task, Reset | Escalate, Lease]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease."""
    out: list[object] = []
    events = []
    for task, decision, leader in items:
        if not leads(conn, leader, now):
            out.append(False)  # no longer the leader: fenced off
            continue
        fence = (task.id, task.lock_epoch)
        crashes = json.dumps(list(decision.crashes or ()))
        if isinstance(decision, Reset):
            cursor = conn.execute(
                _CRASHED_AT
                + ", locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
                "process_state = ?, not_before = ? WHERE id = ? AND lock_epoch = ? "
                "AND locked_by IS NOT NULL",
                (
                    crashes,
                    decision.owner_deaths or 0,
                    now,
                    str(decision.process_state),
                    decision.not_before.timestamp(),
                    *fence,
                ),
            )
            kind = "reset"
            detail = {
                "reason": decision.reason,
                "failure_count": decision.failure_count,
                "crashes": list(decision.crashes or ()),
            }
            rings.add(ch.TASKS)
        else:
            cursor = conn.execute(
                _CRASHED_AT
                + ", locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
                "process_state = 'error', error = ? WHERE id = ? AND lock_epoch = ? "
                "AND locked_by IS NOT NULL",
                (
                    crashes,
                    decision.owner_deaths or 0,
                    now,
                    json.dumps(
                        {"reason": decision.reason, "crashes": list(decision.crashes or ())}
                    ),
                    *fence,
                ),
            )
            kind = "error"
            detail = {"error": {"reason": decision.reason}, "failure_count": decision.failure_count}
            rings.add(ch.task_channel(task.id))
            rings.add(ch.TASKS)
        if cursor.rowcount == 0:
            out.append(False)
            continue
        conn.execute("DELETE FROM requests WHERE task_id = ?", (task.id,))
        events.append((task.id, task.key, task.reply_to, kind, json.dumps(detail), now))
        out.append(True)
    if events:
        store._events(conn, events, rings)
    return out


#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {
    "mark_died": mark_died,
    "reap_worker": reap_worker,
    "apply_crash": apply_crash,
}
