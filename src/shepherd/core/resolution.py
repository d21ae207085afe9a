"""The resolver's cache rule: answers hold for one version of the mapping, and go when it moves.

The store numbers the entity -> partition -> resource mapping: every change
bumps one version. A process caches answers read at a version; once it learns
of a newer version (a wake-up, a periodic read, an answer read at it) every
cached answer is dropped at once, and an answer read at an older version than
the newest one known is never cached. Pure: the caller reads the store.
"""

from __future__ import annotations

from typing import Generic, TypeVar, final

__all__ = ["MAX_CACHED", "VersionedCache"]

K = TypeVar("K")
V = TypeVar("V")

#: The most answers one cache keeps; the oldest goes first.
MAX_CACHED = 100_000


@final
class VersionedCache(Generic[K, V]):
    """Answers valid at one version of a mapping, dropped together when a newer version is seen.

    Args:
        limit: The most answers kept; adding one more drops the oldest.
    """

    __slots__ = ("_answers", "_limit", "version")

    def __init__(self, *, limit: int = MAX_CACHED) -> None:
        if limit < 1:
            raise ValueError(f"a cache must hold at least 1 answer, not {limit}")
        self._answers: dict[K, V] = {}
        self._limit = limit
        #: The newest version of the mapping seen; the cached answers were read at it.
        self.version = 0

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: K) -> V | None:
        """The answer cached for `key`, or None."""
        return self._answers.get(key)

    def observe(self, version: int) -> bool:
        """Learn that the mapping is at `version`; whether that dropped the answers.

        An older or equal version changes nothing (it was read before a newer one).
        """
        if version <= self.version:
            return False
        self.version = version
        self._answers.clear()
        return True

    def put(self, key: K, value: V, version: int) -> bool:
        """Cache `value` for `key`, read at `version`; whether it was kept.

        It is kept only when `version` is the newest seen (`observe` is applied
        first): an answer read before a move is never cached after it.
        """
        self.observe(version)
        if version != self.version:
            return False
        answers = self._answers
        answers.pop(key, None)
        if len(answers) >= self._limit:
            del answers[next(iter(answers))]
        answers[key] = value
        return True

    def keys(self) -> list[K]:
        """The cached keys, oldest first."""
        return list(self._answers)

    def clear(self) -> None:
        """Drop every answer, keeping the version."""
        self._answers.clear()
