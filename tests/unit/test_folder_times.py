"""The per-folder table at the end of a run (tests/support/timings.py) counts and times right."""

from __future__ import annotations

from typing import TYPE_CHECKING

from support.timings import FolderTimes, main, table

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _phases(times: FolderTimes, nodeid: str, outcomes: tuple[str, str, str], at: float) -> None:
    for n, outcome in enumerate(outcomes):
        times.add(nodeid, outcome, at + n, at + n + 1, 1.0)


def test_each_test_counts_once_under_its_worst_phase() -> None:
    times = FolderTimes()
    _phases(times, "tests/unit/test_a.py::ok", ("passed", "passed", "passed"), 0)
    _phases(times, "tests/unit/test_a.py::broken_teardown", ("passed", "passed", "failed"), 3)
    times.add("tests/unit/test_a.py::skipped", "skipped", 10, 11, 1.0)
    times.add("tests/unit/test_a.py::skipped", "passed", 11, 12, 1.0)

    (unit,) = times.folders().values()

    assert (unit.tests, unit.passed, unit.failed, unit.skipped) == (3, 1, 1, 1)
    assert unit.busy == 8.0
    assert unit.window == 12.0


def test_folders_are_the_first_level_under_tests() -> None:
    times = FolderTimes()
    times.add("tests/contract/test_x.py::t[sqlite]", "passed", 0, 2, 2.0)
    times.add("tests/unit/core/test_y.py::t", "passed", 5, 6, 1.0)
    times.add("tests/test_top.py::t", "passed", 7, 8, 1.0)

    folders = times.folders()

    assert sorted(folders) == ["contract", "tests", "unit"]
    lines = table(folders)
    assert lines[0].split()[:6] == ["folder", "tests", "passed", "failed", "skipped", "window"]
    assert lines[-1].split() == ["all", "3", "3", "0", "0", "8.0s", "4.0s"]


def test_runs_written_apart_are_merged_into_one_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = FolderTimes(), FolderTimes()
    first.add("tests/unit/test_a.py::t", "passed", 0, 1, 1.0)
    second.add("tests/faults/test_f.py::t", "failed", 10, 14, 4.0)
    second.add("tests/unit/test_b.py::t", "passed", 20, 21, 1.0)
    first.dump(tmp_path / "1.json")
    second.dump(tmp_path / "2.json")

    assert main([str(tmp_path / "1.json"), str(tmp_path / "2.json"), str(tmp_path / "no")]) == 0

    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    assert rows["faults"] == ["1", "0", "1", "0", "4.0s", "4.0s"]
    assert rows["unit"] == ["2", "2", "0", "0", "21.0s", "2.0s"]
    assert rows["all"] == ["3", "2", "1", "0", "21.0s", "6.0s"]
