"""A `core.effects.TaskEffect` on one task, encoded as both stores write it.

The JSON columns are encoded by `shepherd.payloads`, as every stored value is:
the result with `dumps` (refused over the payload limit), the error with
`dumps_error` (cut, never refused), the crash entries with `dumps_detail`. Each
backend puts an `EffectRow` into its one UPDATE of the task, fenced by the
writer's own `WHERE`, then appends the event and rings the channels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, final

from shepherd.core import alerts
from shepherd.core.effects import UNCHANGED, Claim, on_fail, on_finish, on_start_compensation
from shepherd.errors import PayloadError, StaleEpochError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.ops import FailTask, StartCompensation

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.effects import TaskEffect
    from shepherd.core.records import JsonValue
    from shepherd.store.ops import FinishTask
    from shepherd.store.sql.dialect import Dialect

__all__ = [
    "UPDATE",
    "EffectRow",
    "Encoder",
    "effect_row",
    "owner_alert",
    "owner_effect",
    "plan_finishes",
    "update_params",
]

#: An `EffectRow`'s columns (`update_params`), a template of `store.sql.dialect`;
#: a NULL leaves its column as it is. The writer appends its `WHERE`.
UPDATE = (
    "UPDATE tasks SET process_state = ?, "
    "locked_by = CASE WHEN ? THEN NULL ELSE locked_by END, "
    "complete_by = CASE WHEN ? THEN NULL ELSE complete_by END, "
    "lock_epoch = lock_epoch + ?, failure_count = coalesce(?{int}, failure_count), "
    "not_before = coalesce(?{ts}, not_before), result = coalesce(?{text}, result), "
    "error = coalesce(?{text}, error), crashes = coalesce(?{text}, crashes), "
    "owner_deaths = coalesce(?{int}, owner_deaths), updated_at = ?"
)


class Encoder(Protocol):
    """What encodes a store's JSON values within its payload limit (a backend's `Batch`)."""

    def dumps(self, value: JsonValue) -> str:
        """Encode a payload; raise `PayloadError` if it is refused."""
        ...

    def dumps_error(self, value: JsonValue) -> str:
        """Encode an error body, cut to the limit, never refused."""
        ...


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class EffectRow:
    """What one write does to a task, ready for a store's statement.

    A column value of None leaves the column as it is: the JSON columns take
    encoded text, where JSON null is `"null"`, so None is never a value to
    store there.

    Attributes:
        task_id: The task written.
        process_state: The new state, as stored.
        release: Whether `locked_by` and `complete_by` are cleared.
        revoke: Whether `lock_epoch` is bumped, fencing the old owner off.
        failure_count: The new count, or None.
        not_before: The new earliest claim, or None; each store converts it.
        result: The result as JSON text, or None.
        error: The error as JSON text, or None.
        crashes: The crash entries as JSON text, or None.
        owner_deaths: The new count of owner deaths, or None.
        drop_requests: Whether the task's queued requests are deleted.
        event: The kind of the event appended to the task's history.
        detail: The event's detail as JSON text.
        rings: The channels to ring once the row was written.
    """

    task_id: str
    process_state: str
    release: bool
    revoke: bool
    failure_count: int | None
    not_before: datetime | None
    result: str | None
    error: str | None
    crashes: str | None
    owner_deaths: int | None
    drop_requests: bool
    event: str
    detail: str
    rings: tuple[str, ...]


def effect_row(task_id: str, effect: TaskEffect, encoder: Encoder) -> EffectRow:
    """Encode `effect` on task `task_id` with `encoder`'s limits.

    The event's detail embeds the echoed column as stored (`dumps_detail`);
    a detail without one is encoded like an error, cut rather than refused,
    for it names reasons of any length. A revoked claim rings `signals.TASKS`
    (the task may be claimable again); a task that ends rings its own channel.

    Raises:
        PayloadError: The result is refused (not JSON, or over the limit).
        ValueError: The effect echoes a column it leaves unchanged.
    """
    result = None if effect.result is UNCHANGED else encoder.dumps(effect.result)
    error = None if effect.error is UNCHANGED else encoder.dumps_error(effect.error)
    if effect.echo is None:
        detail = encoder.dumps_error(effect.detail)
    else:
        echoed = result if effect.echo == "result" else error
        if echoed is None:
            raise ValueError(f"the effect echoes its {effect.echo}, which it leaves unchanged")
        detail = dumps_detail(effect.detail, **{effect.echo: echoed})
    revoke = effect.claim is Claim.REVOKED
    rings = (ch.TASKS,) if revoke else ()
    return EffectRow(
        task_id=task_id,
        process_state=str(effect.process_state),
        release=effect.claim is not Claim.KEPT,
        revoke=revoke,
        failure_count=effect.failure_count,
        not_before=effect.not_before,
        result=result,
        error=error,
        crashes=None if effect.crashes is None else dumps_detail(list(effect.crashes)),
        owner_deaths=effect.owner_deaths,
        drop_requests=effect.drop_requests,
        event=str(effect.event),
        detail=detail,
        rings=(*rings, ch.task_channel(task_id)) if effect.terminal else rings,
    )


def plan_finishes(
    ops: Iterable[FinishTask], owners: Mapping[str, tuple[int, str | None]], encoder: Encoder
) -> tuple[list[object], list[tuple[EffectRow, int, str]]]:
    """The owners' `finish` operations, fenced and encoded: what each returns, and what to write.

    Args:
        ops: The operations, in order.
        owners: task id -> (lock_epoch, locked_by), read under the batch's lock.
        encoder: Encodes the results within the store's payload limit.

    Returns:
        One outcome per operation (None; `StaleEpochError` where its owner and
        epoch no longer hold the task; `PayloadError` where its result is
        refused), and (row, epoch, owner) for each finish that stands, in
        order: a task finished twice is written with its last row.
    """
    out: list[object] = []
    writes: list[tuple[EffectRow, int, str]] = []
    for op in ops:
        task_id, owner, epoch = op.task_id, op.locked_by, op.epoch
        if owners.get(task_id) != (epoch, owner):
            out.append(StaleEpochError(task_id, epoch))
            continue
        try:
            row = effect_row(task_id, on_finish(op.result), encoder)
        except PayloadError as exc:
            out.append(exc)
            continue
        writes.append((row, epoch, owner))
        out.append(None)
    return out, writes


def owner_effect(op: FailTask | StartCompensation) -> TaskEffect:
    """What an owner's `fail` or `start_compensation` does to its task (`core.effects`).

    Raises:
        ValueError: A `fail` into a state a task cannot fail into.
    """
    if isinstance(op, FailTask):
        return on_fail(op.state, op.error)
    return on_start_compensation(op.error)


def owner_alert(op: FailTask | StartCompensation, *, failure_count: int) -> alerts.Raised | None:
    """The alert an owner's write stores with its task: one for a `fail` into `error` only.

    Args:
        op: The write, once it changed the task.
        failure_count: The task's failure count, as the write left it.
    """
    if isinstance(op, FailTask):
        return alerts.on_fail(op.state, op.error, failure_count=failure_count)
    return None


def update_params(d: Dialect, row: EffectRow, now: object) -> tuple[object, ...]:
    """The parameters of `UPDATE` for `row`, written at `now`; the fence's follow."""
    return (
        row.process_state,
        row.release,
        row.release,
        int(row.revoke),
        row.failure_count,
        None if row.not_before is None else d.stored(row.not_before),
        row.result,
        row.error,
        row.crashes,
        row.owner_deaths,
        now,
    )
