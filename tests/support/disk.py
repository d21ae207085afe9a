"""A small disk that a test can fill: a tmpfs of a few MiB mounted in its tmp_path.

`small_tmpfs` mounts it (root only) and always unmounts it, lazily if a process
still holds a file there; `Ballast` fills it to the last byte (ENOSPC) and
keeps it full, `remove` gives the space back. Mounts an earlier run left behind
(the source is named `shepherd-faults`) are unmounted by `remove_leftovers`.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import final

__all__ = ["Ballast", "free_bytes", "remove_leftovers", "small_tmpfs"]

_SOURCE = "shepherd-faults"


def _mounted() -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[0] == _SOURCE]


def _umount(path: str) -> None:
    if subprocess.run(["umount", path], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, check=False)


def remove_leftovers() -> None:
    """Unmount every tmpfs this harness mounted and a crashed run left behind."""
    for path in _mounted():
        _umount(path)


@contextmanager
def small_tmpfs(path: Path, size: str = "16m") -> Iterator[Path]:
    """Mount a tmpfs of `size` at `path` (created); unmount it on exit."""
    if os.geteuid() != 0:
        raise AssertionError("mounting a tmpfs needs root: run the fault suite as root")
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", _SOURCE, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"mount -t tmpfs at {path} failed: {done.stderr.strip()}")
    try:
        yield path
    finally:
        _umount(str(path))


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


@final
class Ballast:
    """A file that takes every free byte of its file system."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0

    def fill(self) -> int:
        """Append until ENOSPC (again: space freed meanwhile is taken back); return the size."""
        with self.path.open("ab", buffering=0) as f:
            for block in (1 << 20, 1 << 16, 1 << 12):
                chunk = b"\xa5" * block
                while True:
                    try:
                        self.size += f.write(chunk) or 0
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        return self.size

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
