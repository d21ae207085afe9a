"""How `show`, `retry` and `cancel` find the task a person named.

TASK is tried, in order, as a full task id; as a business key (of any
workflow, or of `--workflow NAME`); as an id prefix of at least MIN_PREFIX
characters. A key used by several workflows, or a prefix of several ids, is
refused (exit 2) with the candidates; nothing found is an unknown task (exit 3).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from shepherd.console.exits import AmbiguousTaskError

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.operations import Operations

__all__ = ["MIN_PREFIX", "find_task_id"]

#: The shortest id prefix `show` accepts.
MIN_PREFIX = 4
#: How many candidates an ambiguous name lists.
SHOWN = 5
_HEX = re.compile(r"[0-9A-Fa-f]+")


async def find_task_id(ops: Operations, name: str, *, workflow: str | None = None) -> str:
    """The id of the one task `name` designates (see the module docstring).

    Args:
        ops: The operations of an App whose store holds the task (opened here if need be).
        name: A task id, a key, or an id prefix.
        workflow: Only keys and prefixes of this workflow's tasks count.

    Raises:
        AmbiguousTaskError: The key or the prefix names several tasks.
        UnknownTaskError: Nothing matches (the message says when the id was purged).
    """
    if await ops.find_task(name) is not None:
        return name
    keyed = await ops.list_tasks(key=name, workflow=workflow, limit=SHOWN + 1)
    if len(keyed) == 1:
        return keyed[0].id
    if keyed:
        raise AmbiguousTaskError(
            f"key {name!r} names tasks of several workflows ({_listed(keyed, workflows=True)}): "
            "pass --workflow NAME",
            [task.id for task in keyed],
        )
    if len(name) >= MIN_PREFIX and _HEX.fullmatch(name):
        found = await ops.list_tasks(id_prefix=name.lower(), workflow=workflow, limit=SHOWN + 1)
        if len(found) == 1:
            return found[0].id
        if found:
            raise AmbiguousTaskError(
                f"task id prefix {name!r} matches several tasks ({_listed(found)}): "
                "give more characters",
                [task.id for task in found],
            )
    return (await ops.get_task(name)).id  # raises UnknownTaskError, saying if it was purged


def _listed(tasks: list[Task], *, workflows: bool = False) -> str:
    shown = tasks[:SHOWN]
    items = [f"{t.workflow} {t.id}" if workflows else t.id for t in shown]
    more = ", and more" if len(tasks) > SHOWN else ""
    return ", ".join(items) + more
