"""Task ids: time-ordered, 20 hex characters, unguessable enough to be unique.

The random part comes from `os.urandom`, drawn 4 KiB at a time per thread: a
draw is a system call during which CPython lets go of the GIL, and one per id
let the store's thread take the interpreter from the event loop on every
submit or call. A forked child draws afresh (it must not repeat its parent's).
"""

from __future__ import annotations

import os
import threading
import time

#: Random bytes drawn at a time: one system call per 1,024 ids.
_DRAW = 4096


class _Pool(threading.local):
    """One thread's random bytes not yet used."""

    def __init__(self) -> None:
        self.data = b""
        self.at = 0


_pool = _Pool()


def _forget_after_fork() -> None:
    global _pool  # the child must not reuse its parent's bytes
    _pool = _Pool()


os.register_at_fork(after_in_child=_forget_after_fork)


def new_task_id() -> str:
    """A new task id: 12 hex digits of milliseconds, then 8 random hex digits."""
    return f"{int(time.time() * 1000):012x}{_random_hex()}"


def _random_hex() -> str:
    """8 random hex digits."""
    pool = _pool
    at = pool.at
    if at + 4 > len(pool.data):
        pool.data, at = os.urandom(_DRAW), 0
    pool.at = at + 4
    return pool.data[at : at + 4].hex()
