"""How SQLite writes a `core.effects.TaskEffect`: one UPDATE of the task, then its event.

Every write that `core.effects` decides (the owner's end of a task, a
supervisor's decision, a crash verdict) is `UPDATE` followed by the writer's
own fence: the owner's in `tasks`, the supervisor's in `leases`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.store import effect_rows
from shepherd.store.sql.dialect import SQLITE

if TYPE_CHECKING:
    from shepherd.store.effect_rows import EffectRow
    from shepherd.store.sqlite.batch import EventRow, SqliteBatch

__all__ = ["UPDATE", "params", "written"]

#: `effect_rows.UPDATE` in SQLite's words.
UPDATE = SQLITE.sql(effect_rows.UPDATE)
_DROP_REQUESTS = "DELETE FROM requests WHERE task_id = ?"


def params(row: EffectRow, now: float) -> tuple[object, ...]:
    """The parameters of `UPDATE` for `row`, written at `now`; the fence's follow."""
    return effect_rows.update_params(SQLITE, row, now)


def written(batch: SqliteBatch, row: EffectRow, key: str | None, reply_to: str | None) -> EventRow:
    """Once `row` is written by `batch`: drop requests if it says so, ring; the event to insert.

    `key` and `reply_to` are the task's, which every event repeats.
    """
    if row.drop_requests:
        batch.conn.execute(_DROP_REQUESTS, (row.task_id,))
    batch.rings.update(row.rings)
    return (row.task_id, key, reply_to, row.event, row.detail, batch.now)
