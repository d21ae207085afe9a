"""The garbage collector's first threshold while roles run in this process.

CPython collects its youngest generation every 700 net allocations of
container objects, and every tenth of those collections also the next
generation, and so on: with thousands of workflows in flight (each a coroutine
with its frames, futures and timers) the full collections walk every live
object, and a busy process spent about a sixth of its time collecting (see
`docs/benchmarks.md`). Reference counting frees almost all of a role's garbage
at once; the collector is only there for cycles, which can wait a little
longer. So while `App.run` runs roles it raises the first threshold to
`Settings.gc_threshold` (never lowers it, leaves a disabled collector alone,
and leaves the older generations' thresholds as they were), and puts the old
value back when the last role of the process has stopped.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["raised_threshold"]

_lock = threading.Lock()
#: How many `raised_threshold` blocks are open, and the threshold before the first.
_open = 0
_before: tuple[int, int, int] | None = None


@contextmanager
def raised_threshold(first: int | None) -> Iterator[None]:
    """Raise the collector's first threshold to `first` for the block (None: leave it)."""
    global _open, _before
    if first is None:
        yield
        return
    with _lock:
        if _open == 0:
            _before = gc.get_threshold()
            if gc.isenabled() and _before[0] < first:
                gc.set_threshold(first, _before[1], _before[2])
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0 and _before is not None:
                if gc.get_threshold()[0] == max(first, _before[0]):
                    # Put back only what this module set: a change made meanwhile stays.
                    gc.set_threshold(*_before)
                _before = None
