"""Task ids: time-ordered, 20 hex characters, unguessable enough to be unique."""

from __future__ import annotations

import os
import time


def new_task_id() -> str:
    """A new task id: 12 hex digits of milliseconds, then 8 random hex digits."""
    return f"{int(time.time() * 1000):012x}{os.urandom(4).hex()}"
