"""Files that other processes append to, read while they write."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["written_lines"]


def written_lines(path: Path) -> list[str]:
    """The lines of `path` written whole so far (none while it does not exist).

    A reader racing an append can see a line that is not all there yet (a
    write that crosses a page boundary shows in two steps): only the lines
    ended by their newline count.
    """
    if not path.exists():
        return []
    *lines, _partial = path.read_text().split("\n")
    return lines
