"""The WHERE clause of `list_tasks`, for both backends (the placeholder and the time type differ)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.store.ops import ListTasks

__all__ = ["task_filter"]


def task_filter(
    op: ListTasks, *, mark: str, instant: Callable[[datetime], object] = lambda at: at
) -> tuple[str, list[object]]:
    """(" WHERE ...", parameters) selecting the tasks that match every filter `op` gives.

    Args:
        op: The listing: only tasks in one of its `states` (all when empty), of
            its `workflow`, with its business `key`, whose id starts with its
            `id_prefix`, last changed at or after its `updated_since`; a filter
            left None does not apply.
        mark: The backend's placeholder (`?` or `%s`).
        instant: Turns `updated_since` into the backend's time column type.

    Returns:
        The clause (empty when no filter is given) and its parameters, in order.
    """
    conditions: list[str] = []
    params: list[object] = []
    if op.states:
        conditions.append(f"process_state IN ({', '.join([mark] * len(op.states))})")
        params.extend(str(state) for state in op.states)
    since = op.updated_since
    # (condition, its parameter): a filter applies when its parameter is given.
    optional: tuple[tuple[str, object], ...] = (
        (f"workflow = {mark}", op.workflow),
        (f"key = {mark}", op.key),
        # The length is an int of ours, not user text: safe to write inline.
        (f"substr(id, 1, {len(op.id_prefix or '')}) = {mark}", op.id_prefix),
        (f"updated_at >= {mark}", None if since is None else instant(since)),
    )
    for condition, value in optional:
        if value is not None:
            conditions.append(condition)
            params.append(value)
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), params
