"""Where a page of tasks ends: the keyset cursor of `list_tasks(before=...)`.

Tasks are listed newest first by (created_at, id); a page continues after the
last task of the previous one, whatever was submitted meanwhile, and costs the
same at any depth (the store seeks to the cursor in an index, it skips
nothing). `TaskCursor.encode` makes it a short URL-safe text for a link;
`TaskCursor.decode` reads it back and refuses anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, final

from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from shepherd.core.records import Task

__all__ = ["TaskCursor"]

#: microseconds since the Unix epoch, a dot, the task id (what a task id may hold).
_TEXT = re.compile(r"(-?[0-9]{1,19})\.([0-9A-Za-z_-]{1,100})")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCursor:
    """The (created_at, id) of the last task of a page: the next page lists older ones."""

    created_at: datetime
    task_id: str

    @classmethod
    def of(cls, task: Task) -> TaskCursor:
        """The cursor that continues after `task`."""
        return cls(created_at=task.created_at, task_id=task.id)

    def encode(self) -> str:
        """A URL-safe text for this cursor (`TaskCursor.decode` reads it back)."""
        at = self.created_at.astimezone(UTC) - _EPOCH
        micros = (at.days * 86_400 + at.seconds) * 1_000_000 + at.microseconds
        return f"{micros}.{self.task_id}"

    @classmethod
    def decode(cls, text: str) -> TaskCursor:
        """The cursor `encode` wrote as `text`.

        Raises:
            ConfigError: `text` is not a cursor (field `cursor`).
        """
        found = _TEXT.fullmatch(text) if isinstance(text, str) else None
        if found is None:
            shown = repr(text)[:60]
            raise ConfigError("cursor", f"{shown} is not a page cursor of the task list")
        try:
            at = _EPOCH + timedelta(microseconds=int(found[1]))
        except OverflowError:
            raise ConfigError("cursor", f"{text[:60]!r} names a time out of range") from None
        return cls(created_at=at, task_id=found[2])


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
