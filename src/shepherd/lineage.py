"""A task's parent and children (child workflows), as an operator reads them.

Read through `app.operations` alone, as the CLI and the dashboard must: a
task's children are the child steps it recorded (each names its child and
the policy it was started with), and a child's id names its parent and the
step that started it (`core.children`). `shepherd show`, `shepherd tasks
--parent` and the dashboard's task page read the links here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core import children as rules
from shepherd.core.children import ChildLink, Links

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.operations import Operations

__all__ = ["ChildLink", "Links", "children_of", "links_of"]


async def links_of(ops: Operations, task: Task) -> Links:
    """`task`'s parent link (None for a top task) and its children's, by seq."""
    parent = None
    above = rules.parent_of(task.id)
    if above is not None:
        found = await ops.find_task(above[0])
        if found is not None:
            parent = next(
                (
                    link
                    for link in await _children(ops, found, read=False)
                    if link.child_id == task.id
                ),
                None,
            )
    return Links(parent=parent, children=tuple(await _children(ops, task, read=True)))


async def children_of(ops: Operations, task_id: str) -> list[Task]:
    """The children of task `task_id`, by the seq of the step that started each.

    Raises:
        UnknownTaskError: No such task.
    """
    task = await ops.get_task(task_id)
    found = [
        await ops.find_task(child) for _, child, _, _ in rules.child_links(task.id, task.steps)
    ]
    return [child for child in found if child is not None]


async def _children(ops: Operations, task: Task, *, read: bool) -> list[ChildLink]:
    """The links of `task`'s children; their states read when `read` (else `pending`)."""
    links = []
    for seq, child_id, workflow, policy in rules.child_links(task.id, task.steps):
        child = await ops.find_task(child_id) if read else None
        links.append(
            ChildLink(
                parent_id=task.id,
                child_id=child_id,
                seq=seq,
                workflow=workflow,
                process_state="pending" if child is None else str(child.process_state),
                on_parent_end=policy,
            )
        )
    return links
