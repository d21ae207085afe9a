"""Log records as they arrive, from any thread, for tests to wait on.

`LogWatch` is a logging handler attached to one logger for the duration of a
`with` block. Its `wait_for` blocks the calling thread until a matching record
arrives (or a timeout passes): a handler that must block the event loop *until*
something is logged waits on it instead of sleeping blindly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Self

__all__ = ["LogWatch"]

Match = Callable[[logging.LogRecord], bool]


class LogWatch(logging.Handler):
    """Every record of `logger` (and its children) at `level` or above."""

    def __init__(self, logger: str, *, level: int = logging.DEBUG) -> None:
        super().__init__(level)
        self.logger = logging.getLogger(logger)
        self.records: list[logging.LogRecord] = []
        self._arrived = threading.Condition()
        self._saved_level = self.logger.level

    def __enter__(self) -> Self:
        self.logger.addHandler(self)
        if self.logger.getEffectiveLevel() > self.level:
            self.logger.setLevel(self.level)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self._saved_level)

    def emit(self, record: logging.LogRecord) -> None:
        with self._arrived:
            self.records.append(record)
            self._arrived.notify_all()

    def matching(self, match: Match) -> list[logging.LogRecord]:
        """The records so far for which `match` is true."""
        with self._arrived:
            return [r for r in self.records if match(r)]

    def wait_for(self, match: Match, *, timeout: float) -> logging.LogRecord | None:
        """Block this thread until a matching record arrives; None after `timeout` s."""
        with self._arrived:
            found = self._arrived.wait_for(
                lambda: next((r for r in self.records if match(r)), None), timeout=timeout
            )
        return found
