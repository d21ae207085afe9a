"""How PostgreSQL writes a `core.effects.TaskEffect`: one UPDATE of the task, then its event.

Every write that `core.effects` decides (the owner's end of a task, a
supervisor's decision, a crash verdict) is `UPDATE` followed by the writer's
own fence: the owner's in `tasks`, the supervisor's in `leases`. `UPDATE_EACH`
sets the same columns from arrays, for many owner writes in one statement.
Each writer drops the requests of the tasks it changed at once, afterwards.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from shepherd.store import effect_rows
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.store.effect_rows import EffectRow
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["UPDATE", "UPDATE_EACH", "params", "params_each", "written"]

#: `effect_rows.UPDATE` in PostgreSQL's words.
UPDATE = POSTGRES.sql(effect_rows.UPDATE)
#: `UPDATE` of many tasks (`params_each`), each fenced by its owner and epoch. The
#: rows are found by `id = ANY(...)` (see KEYED in postgres/rows.py).
UPDATE_EACH = (
    "WITH v AS MATERIALIZED (SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], "
    "%b::text[], %b::boolean[], %b::integer[], %b::integer[], %b::timestamptz[], %b::text[], "
    "%b::text[], %b::text[], %b::integer[]) AS v(id, lock_epoch, locked_by, process_state, "
    "release, bump, failure_count, not_before, result, error, crashes, owner_deaths)) "
    "UPDATE tasks t SET process_state = v.process_state, "
    "locked_by = CASE WHEN v.release THEN NULL ELSE t.locked_by END, "
    "complete_by = CASE WHEN v.release THEN NULL ELSE t.complete_by END, "
    "lock_epoch = t.lock_epoch + v.bump, failure_count = coalesce(v.failure_count, t.failure_count), "
    "not_before = coalesce(v.not_before, t.not_before), result = coalesce(v.result, t.result), "
    "error = coalesce(v.error, t.error), crashes = coalesce(v.crashes, t.crashes), "
    "owner_deaths = coalesce(v.owner_deaths, t.owner_deaths), updated_at = %b FROM v "
    "WHERE t.id = ANY(ARRAY(SELECT id FROM v)) AND t.id = v.id "
    "AND t.lock_epoch = v.lock_epoch AND coalesce(t.locked_by, '') = v.locked_by"
)


def params(row: EffectRow, now: datetime) -> tuple[object, ...]:
    """The parameters of `UPDATE` for `row`, written at `now`; the fence's follow."""
    return effect_rows.update_params(POSTGRES, row, now)


def params_each(writes: Iterable[tuple[EffectRow, int, str]], now: datetime) -> tuple[object, ...]:
    """The parameters of `UPDATE_EACH`: each row with the epoch and owner that fence it.

    `writes` holds at least one row: an `unnest` of none has no columns to pass.
    """
    rows = [
        (row.task_id, epoch, owner, row.process_state, row.release, int(row.revoke), *_values(row))
        for row, epoch, owner in writes
    ]
    return (*(list(column) for column in zip(*rows, strict=True)), now)


def _values(row: EffectRow) -> tuple[object, ...]:
    return (
        row.failure_count,
        row.not_before,
        row.result,
        row.error,
        row.crashes,
        row.owner_deaths,
    )


def written(batch: PostgresBatch, row: EffectRow, key: str | None, reply_to: str | None) -> None:
    """Once `row` is written by `batch`: queue its event (the task's `key` and `reply_to` in it), ring."""
    batch.event(row.task_id, key, reply_to, row.event, row.detail)
    batch.rings.update(row.rings)
