"""A task's parent and children (child workflows), as `shepherd show` prints them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from shepherd.core.children import ChildLink, Links
    from shepherd.core.records import JsonValue

__all__ = ["links_json", "print_links"]


def _link(link: ChildLink, task_id: str) -> dict[str, JsonValue]:
    return {
        "task": task_id,
        "workflow": link.workflow,
        "seq": link.seq,
        "process_state": link.process_state,
        "on_parent_end": link.on_parent_end,
    }


def links_json(links: Links) -> dict[str, JsonValue]:
    """`parent` (the parent's id and the seq of the step that started this task) and `children`."""
    parent = links.parent
    return {
        "parent": None if parent is None else {"task": parent.parent_id, "seq": parent.seq},
        "children": [_link(child, child.child_id) for child in links.children],
    }


def print_links(links: Links) -> None:
    """The parent line and a line per child; nothing for a task with neither."""
    parent = links.parent
    if parent is None and not links.children:
        return
    click.echo("")
    if parent is not None:
        click.echo(f"parent: {parent.parent_id} (its step {parent.seq})")
    if links.children:
        click.echo("children:")
        for child in links.children:
            policy = "" if child.on_parent_end == "wait" else f", {child.on_parent_end}"
            click.echo(
                f"  step {child.seq}: {child.child_id} {child.workflow} "
                f"({child.process_state}{policy})"
            )
