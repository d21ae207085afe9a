"""Tests and time per folder of tests/, for the table at the end of a run.

tests/conftest.py feeds every test report to a `FolderTimes` (under
pytest-xdist, on the controller, which receives every worker's reports) and
prints its table in the terminal summary; `--folder-times=PATH` also writes the
figures to PATH as JSON, and `python tests/support/timings.py PATH...` prints
one table of several runs (scripts/test runs the fault tests apart).

Per folder: the tests (each counted once, by its worst phase), and two times.
`window` is the wall time from the first of its tests starting to the last one
ending: the folder's wall time when it runs alone, overlapping other folders'
windows when tests run in parallel. `test time` adds up each test's set-up, call
and tear-down: what the folder costs the workers together.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Folder", "FolderTimes", "main", "table"]

#: Outcomes from best to worst: a test is counted under the worst of its phases.
_RANK = {"passed": 0, "skipped": 1, "failed": 2}


@dataclass
class Folder:
    """One folder's figures."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    start: float = float("inf")
    stop: float = 0.0
    busy: float = 0.0

    @property
    def tests(self) -> int:
        return self.passed + self.failed + self.skipped

    @property
    def window(self) -> float:
        return max(0.0, self.stop - self.start)

    def merge(self, other: Folder) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.start = min(self.start, other.start)
        self.stop = max(self.stop, other.stop)
        self.busy += other.busy


def _folder(nodeid: str) -> str:
    """`tests/contract/test_x.py::t` -> `contract`; a test file directly in tests/ -> `tests`."""
    parts = nodeid.split("::", 1)[0].split("/")
    if parts[0] == "tests" and len(parts) > 2:
        return parts[1]
    return parts[0] if len(parts) > 1 else "tests"


@dataclass
class FolderTimes:
    """Collects test reports (`add`) into per-folder figures."""

    #: nodeid -> (folder, worst outcome so far)
    _outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)
    _folders: dict[str, Folder] = field(default_factory=dict)

    def add(self, nodeid: str, outcome: str, start: float, stop: float, duration: float) -> None:
        """One phase's report (set-up, call or tear-down) of test `nodeid`."""
        name = _folder(nodeid)
        folder = self._folders.setdefault(name, Folder())
        folder.start = min(folder.start, start)
        folder.stop = max(folder.stop, stop)
        folder.busy += duration
        _, worst = self._outcomes.get(nodeid, (name, "passed"))
        if _RANK.get(outcome, 2) > _RANK[worst]:
            worst = outcome if outcome in _RANK else "failed"
        self._outcomes[nodeid] = (name, worst)

    def folders(self) -> dict[str, Folder]:
        """The figures so far, by folder."""
        counted = {
            name: Folder(start=folder.start, stop=folder.stop, busy=folder.busy)
            for name, folder in self._folders.items()
        }
        for name, outcome in self._outcomes.values():
            folder = counted[name]
            setattr(folder, outcome, getattr(folder, outcome) + 1)
        return counted

    def dump(self, path: Path) -> None:
        """Write the figures to `path` as JSON."""
        path.write_text(json.dumps({n: asdict(f) for n, f in self.folders().items()}))


def table(folders: dict[str, Folder]) -> list[str]:
    """The figures as lines of text, one per folder, then the total."""
    lines = [
        f"{'folder':<12} {'tests':>6} {'passed':>6} {'failed':>6} {'skipped':>7} "
        f"{'window':>8} {'test time':>9}"
    ]
    total = Folder()
    for name in sorted(folders):
        folder = folders[name]
        total.merge(folder)
        lines.append(_row(name, folder))
    lines.append(_row("all", total))
    return lines


def _row(name: str, folder: Folder) -> str:
    return (
        f"{name:<12} {folder.tests:>6} {folder.passed:>6} {folder.failed:>6} "
        f"{folder.skipped:>7} {folder.window:>7.1f}s {folder.busy:>8.1f}s"
    )


def _load(path: Path) -> dict[str, Folder]:
    raw: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return {name: Folder(**figures) for name, figures in raw.items()}


def main(paths: list[str]) -> int:
    """Print one table of the runs whose `--folder-times` files are `paths` (missing ones skipped)."""
    merged: dict[str, Folder] = {}
    for path in map(Path, paths):
        if not path.is_file():
            continue
        for name, folder in _load(path).items():
            merged.setdefault(name, Folder()).merge(folder)
    for line in table(merged):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
