"""Fixtures shared by every test: a clean environment, a fake clock, PostgreSQL databases.

And, at the end of every run, a table of the tests and time per folder
(support.timings; `--folder-times=PATH` also writes it as JSON).

The PostgreSQL fixtures (`postgres_url`, `make_postgres_url`, and the session's
template behind them) are registered here, once, so that every directory using
them (the backend's own tests, the conformance suite, the integration tests)
shares one template database per session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from shepherd.testing import FakeClock
from support.postgres import (  # fixtures, registered by importing them
    make_postgres_url,
    postgres_pool,
    postgres_server,
    postgres_template,
    postgres_url,
)
from support.timings import FolderTimes, table

__all__ = [
    "fake_clock",
    "make_postgres_url",
    "postgres_pool",
    "postgres_server",
    "postgres_template",
    "postgres_url",
]

#: The one SHEPHERD_* variable tests may see: set by scripts/test.
_KEEP = {"SHEPHERD_TEST_POSTGRES_URL"}


@pytest.fixture(autouse=True)
def _scrub_shepherd_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's SHEPHERD_* settings must not change what tests see."""
    for name in list(os.environ):
        if name.startswith("SHEPHERD_") and name not in _KEEP:
            monkeypatch.delenv(name)


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when the test says so."""
    return FakeClock()


#: This process's per-folder figures (under xdist the controller's counts every worker's tests).
_times = FolderTimes()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--folder-times",
        metavar="PATH",
        default=None,
        help="also write the tests and time per folder to PATH, as JSON",
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _times.add(report.nodeid, report.outcome, report.start, report.stop, report.duration)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller prints the table
        return
    folders = _times.folders()
    if not folders:
        return
    terminalreporter.section("tests and time per folder")
    for line in table(folders):
        terminalreporter.write_line(line)
    path = config.getoption("--folder-times")
    if path:
        _times.dump(Path(path))


#: Folders whose tests one pytest-xdist worker runs, one after another (with
#: `--dist loadgroup`, as scripts/test runs the suite): the fault tests stop and
#: restart a PostgreSQL cluster of their own, shared by all of them.
SERIAL_FOLDERS = ("tests/faults/",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` with each of SERIAL_FOLDERS as one group, every other test alone.

    The folders are grouped by path here, on the controller: pytest-xdist's own
    `xdist_group` marker does not reach the scheduler under this pytest.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class SerialFolders(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            for folder in SERIAL_FOLDERS:
                if nodeid.startswith(folder):
                    return folder
            return str(super()._split_scope(nodeid))

    return SerialFolders(config, log)
