"""The WHERE clause of `list_tasks`, for both backends (only the placeholder differs)."""

from __future__ import annotations

from collections.abc import Sequence

from shepherd.core.states import ProcessState

__all__ = ["task_filter"]


def task_filter(
    *,
    mark: str,
    states: Sequence[ProcessState] = (),
    workflow: str | None = None,
    key: str | None = None,
    id_prefix: str | None = None,
    updated_since: object = None,
) -> tuple[str, list[object]]:
    """(" WHERE ...", parameters) selecting the tasks that match every filter given.

    Args:
        mark: The backend's placeholder (`?` or `%s`).
        states: Only tasks in one of these states (all when empty).
        workflow: Only tasks of this workflow.
        key: Only tasks with this business key.
        id_prefix: Only tasks whose id starts with this text.
        updated_since: Only tasks last changed at or after this instant, in the
            backend's time column type (None: no bound).

    Returns:
        The clause (empty when no filter is given) and its parameters, in order.
    """
    conditions: list[str] = []
    params: list[object] = []
    if states:
        conditions.append(f"process_state IN ({', '.join([mark] * len(states))})")
        params.extend(str(state) for state in states)
    # (condition, its parameter): a filter applies when its parameter is given.
    optional: tuple[tuple[str, object], ...] = (
        (f"workflow = {mark}", workflow),
        (f"key = {mark}", key),
        # The length is an int of ours, not user text: safe to write inline.
        (f"substr(id, 1, {len(id_prefix or '')}) = {mark}", id_prefix),
        (f"updated_at >= {mark}", updated_since),
    )
    for condition, value in optional:
        if value is not None:
            conditions.append(condition)
            params.append(value)
    return (f" WHERE {' AND '.join(conditions)}" if conditions else ""), params
