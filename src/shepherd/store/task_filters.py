"""The statement of `list_tasks`, for both backends (the placeholder and the time type differ).

Tasks are listed newest first by (created_at, id), and every filter is
written so that an index yields that order (migration 0015): the listing reads
about one page of rows, however many tasks match and however deep the page.

* A page continues after the cursor with `(created_at, id) < (?, ?)`, a seek
  in the index, never an OFFSET.
* States: one ordered range per state, in `tasks_state` (or, with a
  workflow, `tasks_workflow_state`), each cut at the page's size, merged.
  A workflow without states takes every state's range, so that a rare state
  of a busy workflow is not found by scanning the others.
* A key, or an id range, finds few tasks: on SQLite, which keeps no
  statistics to tell, they are found through that index alone and the other
  filters checked on them (`pin`), rather than by walking an ordered index
  past every task that does not match.
* An id prefix is a range of the primary key, `id >= prefix AND id < next`
  (where `next` follows every id that starts with the prefix), checked
  exactly with `substr` too: a range finds it through the index, whatever
  the backend's collation does with other characters than the hex digits of
  an id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.store.ops.tasks import MAX_FILTER_CHARS, checked_listing

if TYPE_CHECKING:
    from shepherd.store.ops import ListTasks

__all__ = [
    "MANY_IDS",
    "MAX_FILTER_CHARS",
    "checked_listing",
    "count_query",
    "few_ids",
    "ids_probe",
    "list_query",
    "prefix_end",
]

#: How many ids sharing a prefix make it "many": the list then walks the order
#: index and checks the prefix on each task, instead of sorting every id found
#: in the primary key's range (ids start with the time: a prefix of 3
#: characters is every task of two years).
MANY_IDS = 20_000


_ORDER = " ORDER BY created_at DESC, id DESC LIMIT {mark}"


def list_query(
    op: ListTasks,
    *,
    mark: str,
    columns: str,
    limit: object,
    instant: Callable[[datetime], object] = lambda at: at,
    prefix_range: bool = True,
    pin: bool = False,
    ordered: bool = True,
) -> tuple[str, list[object]]:
    """(statement, parameters) listing the tasks that match every filter `op` gives.

    Args:
        op: The listing: only tasks in one of its `states` (all when empty), of
            its `workflow`, with its business `key`, whose id starts with its
            `id_prefix`, last changed at or after its `updated_since`, created
            in [`created_from`, `created_to`), and after its cursor `before`;
            a filter left None does not apply.
        mark: The backend's placeholder (`?` or `%s`).
        columns: The task columns to select.
        limit: The LIMIT parameter (the backend's reading of `op.limit`).
        instant: Turns a datetime into the backend's time column type.
        prefix_range: Whether an id prefix is looked up as a range of the
            primary key (False: only checked with `substr`, so that the
            listing walks an index in its order; for a prefix that many ids
            share, on a backend without statistics to tell).
        pin: For a backend without statistics (SQLite): when a key or an id
            range is given, find the tasks through its index alone and check
            the other filters on them (`+column` keeps an index from being
            used for a condition); otherwise such a planner may walk a state's
            or the creation order's index past every task that does not match.
        ordered: Whether the states' ranges, merged, are sorted again (False:
            one after the other, as a count reads them; each is still read in
            the listing's order, so that its index is the one used), and the
            few tasks a pinned narrow index finds are sorted (False: not).

    Returns:
        The statement and its parameters, in order.
    """
    narrow = op.key is not None or bool(op.id_prefix and prefix_range)
    plus = "+" if pin and narrow else ""
    where, params = _common(op, mark=mark, instant=instant, prefix_range=prefix_range, plus=plus)
    arms: Sequence[ProcessState] = list(dict.fromkeys(op.states))
    order = _ORDER.format(mark=mark)
    if plus:
        if arms:
            where = [f"+process_state IN ({', '.join([mark] * len(arms))})", *where]
            params = [*(str(state) for state in arms), *params]
        # Found through the narrow index alone: a count need not sort them.
        pinned = order if ordered else f" LIMIT {mark}"
        return f"SELECT {columns} FROM tasks{_where(where)}{pinned}", [*params, limit]
    if not arms and op.workflow is not None and not narrow:
        arms = list(ProcessState)
    if len(arms) <= 1:
        if arms:
            where = [f"process_state = {mark}", *where]
            params = [str(arms[0]), *params]
        return f"SELECT {columns} FROM tasks{_where(where)}{order}", [*params, limit]
    selects = []
    every: list[object] = []
    for n, state in enumerate(arms):
        clause = _where([f"process_state = {mark}", *where])
        selects.append(
            f"SELECT {columns} FROM (SELECT {columns} FROM tasks{clause}{order}) AS s{n}"
        )
        every.extend([str(state), *params, limit])
    merged = order if ordered else f" LIMIT {mark}"
    return " UNION ALL ".join(selects) + merged, [*every, limit]


def count_query(
    op: ListTasks,
    *,
    mark: str,
    limit: object,
    instant: Callable[[datetime], object] = lambda at: at,
    pin: bool = False,
) -> tuple[str, list[object]]:
    """(statement, parameters) counting the tasks that match every filter of `op`, up to `limit`.

    The tasks are found as `list_query` finds them (the same index for the
    same filters, on either backend, whatever the statistics say), without
    the cursor, and counted as they come: the count reads at most `limit`
    rows of an index however many tasks match (`limit`: the backend's
    reading of the cap). An id prefix is counted in the primary key's range,
    unsorted: walking the creation order instead, past every id that does not
    start with it, is what a planner picks when it expects few of the ids it
    checks to match, and reads the whole table when a short prefix is every id.
    """
    if op.id_prefix:
        plus = "+" if pin else ""
        where, params = _common(
            replace(op, before=None), mark=mark, instant=instant, prefix_range=True, plus=plus
        )
        arms = list(dict.fromkeys(op.states))
        if arms:
            where = [f"{plus}process_state IN ({', '.join([mark] * len(arms))})", *where]
            params = [*(str(state) for state in arms), *params]
        inner = f"SELECT id FROM tasks{_where(where)} LIMIT {mark}"
        return f"SELECT count(*) FROM ({inner}) AS matching", [*params, limit]
    sql, params = list_query(
        replace(op, before=None),
        mark=mark,
        columns="id",
        limit=limit,
        instant=instant,
        pin=pin,
        ordered=False,
    )
    return f"SELECT count(*) FROM ({sql}) AS matching", params


def ids_probe(prefix: str, *, mark: str) -> tuple[str, list[object]]:
    """(statement, parameters) counting the ids in `prefix`'s range, up to MANY_IDS.

    The count reads at most MANY_IDS entries of the primary key: whether fewer
    share the prefix tells `list_tasks` which plan to ask for (`prefix_range`).
    A planner cannot tell from a prepared statement's parameters, and SQLite
    keeps no statistics at all.
    """
    end = prefix_end(prefix)
    bounds, params = (
        (f"id >= {mark}", [prefix])
        if end is None
        else (
            f"id >= {mark} AND id < {mark}",
            [prefix, end],
        )
    )
    sql = f"SELECT count(*) FROM (SELECT 1 FROM tasks WHERE {bounds} LIMIT {mark}) AS ids"
    return sql, [*params, MANY_IDS]


def few_ids(found: int) -> bool:
    """Whether `found`, the count `ids_probe` read, is fewer than MANY_IDS."""
    return found < MANY_IDS


def prefix_end(prefix: str) -> str | None:
    """The least text after every text that starts with `prefix` (None: there is none)."""
    for cut in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[cut]) + 1
        if 0xD800 <= code <= 0xDFFF:  # no surrogates in stored text
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:cut] + chr(code)
    return None


def _common(
    op: ListTasks,
    *,
    mark: str,
    instant: Callable[[datetime], object],
    prefix_range: bool,
    plus: str,
) -> tuple[list[str], list[object]]:
    """The conditions (and their parameters) of every filter but the states.

    `plus` ("+" or "") goes before the columns whose index must not be used.
    """
    conditions: list[str] = []
    params: list[object] = []
    for condition, value in (
        (f"{plus}workflow = {mark}", op.workflow),
        (f"key = {mark}", op.key),
    ):
        if value is not None:
            conditions.append(condition)
            params.append(value)
    prefix = op.id_prefix
    if prefix and prefix_range:
        conditions.append(f"id >= {mark}")
        params.append(prefix)
        end = prefix_end(prefix)
        if end is not None:
            conditions.append(f"id < {mark}")
            params.append(end)
    if prefix:
        # The length is an int of ours, not user text: safe to write inline.
        conditions.append(f"substr(id, 1, {len(prefix)}) = {mark}")
        params.append(prefix)
    for condition, at in (
        (f"{plus}updated_at >= {mark}", op.updated_since),
        (f"{plus}created_at >= {mark}", op.created_from),
        (f"{plus}created_at < {mark}", op.created_to),
    ):
        if at is not None:
            conditions.append(condition)
            params.append(instant(at))
    if op.before is not None:
        conditions.append(f"({plus}created_at, {plus}id) < ({mark}, {mark})")
        params.extend([instant(op.before.created_at), op.before.task_id])
    return conditions, params


def _where(conditions: list[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""
