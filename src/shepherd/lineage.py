"""A task's parent and children (child workflows), as an operator reads them.

`Operations.links` is one of these, over the App's store: `shepherd show`,
`shepherd tasks --parent` and the dashboard's task page read the links here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.store.ops.children import Links

__all__ = ["LinkOperations"]


@final
class LinkOperations:
    """Parent and child links of tasks, over an App's store (opened by `open_`)."""

    def __init__(self, store: Callable[[], Store], open_: Callable[[], Awaitable[object]]) -> None:
        self._store = store
        self._open = open_

    async def of(self, task_id: str) -> Links:
        """The task's parent link (None for a top task) and its children's, by seq."""
        await self._open()
        return await self._store().task_links(task_id)

    async def children(self, task_id: str) -> list[Task]:
        """The task's children, by the seq of the step that started each (unknown: none)."""
        links = await self.of(task_id)
        store = self._store()
        found = [await store.get_task(link.child_id) for link in links.children]
        return [task for task in found if task is not None]
