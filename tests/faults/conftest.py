"""Fixtures of the fault suite: a PostgreSQL cluster it may restart, a fresh database per test.

The fault tests stop, restart and cut off PostgreSQL, so they never use the
suite's shared server: `fault_cluster` initdb's a cluster of their own (port
FAULT_PORT, under /tmp/shepherd-faults) once per session and removes it at the
end; `fault_db` gives each test a fresh database on it, and restarts the server
first if an earlier test left it stopped.

One run of the fault suite at a time: the suite takes a lock file before its
first test (waiting for another run to finish), then removes what an earlier
run that crashed left behind: clusters, network namespaces, veth links, the
blackhole route, tmpfs mounts. Under pytest-xdist with `--dist loadgroup`
(scripts/test) a single worker runs them, one after another, beside the rest of
the suite on the other workers (SERIAL_FOLDERS in tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from support import disk, netns, pgcluster
from support.pgcluster import FaultDb, PgCluster

#: The port of the fault suite's own cluster (the shared server is on 55432). Below
#: the kernel's ephemeral range (32768-60999): a server restarted mid-test cannot bind
#: a port that one of the test's own client connections happens to use as its source.
FAULT_PORT = 25433

_LOCK_PATH = Path("/tmp/shepherd-faults.lock")
_LOCK_PATIENCE = 900.0
_lock: IO[str] | None = None
_lock_problem = ""


def _take_lock() -> None:
    """Hold the suite's lock for the rest of this process; clean up after crashed runs."""
    global _lock, _lock_problem
    try:
        handle = _LOCK_PATH.open("a+")
    except PermissionError:  # made by another user's run: a shared lock works read-only too
        handle = _LOCK_PATH.open("r")
    deadline = time.monotonic() + _LOCK_PATIENCE
    told = False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                _lock_problem = (
                    f"another run of the fault suite held {_LOCK_PATH} for {_LOCK_PATIENCE:.0f} s"
                )
                return
            if not told:
                print(f"\nfaults: waiting for another run of the fault suite ({_LOCK_PATH})")
                told = True
            time.sleep(1.0)  # waiting for another process's lock: nothing to poll but the lock
    if handle.writable():
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    _lock = handle
    pgcluster.remove_leftovers()
    if os.geteuid() == 0:
        netns.remove_leftovers()
        disk.remove_leftovers()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    faults = any(item.get_closest_marker("faults") for item in items)
    # Taken here, not in a fixture: the wait must not count against a test's
    # timeout. Not in a pytest-xdist worker: every worker collects these tests,
    # one runs them all (tests/conftest.py, SERIAL_FOLDERS) and takes the lock
    # before its first one (below).
    if faults and _lock is None and not _lock_problem and not hasattr(config, "workerinput"):
        _take_lock()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    # Outside pytest-timeout's timer, which starts inside this wrapper.
    if _lock is None and not _lock_problem and item.get_closest_marker("faults"):
        _take_lock()
    yield


@pytest.fixture(autouse=True)
def _fault_suite_lock() -> None:
    if _lock_problem:
        pytest.fail(_lock_problem, pytrace=False)
    if _lock is None:
        _take_lock()
        if _lock_problem:
            pytest.fail(_lock_problem, pytrace=False)


def _require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "this fault test needs root (network namespaces, a tmpfs mount, a PostgreSQL "
            "cluster of its own run as the postgres user): run the suite as root",
            pytrace=False,
        )


@pytest.fixture
def require_root() -> None:
    """Fail (never skip) when the test cannot do what it must as root."""
    _require_root()


@pytest.fixture(scope="session")
def fault_cluster() -> Iterator[PgCluster]:
    """The fault suite's own PostgreSQL cluster, for the whole session."""
    _require_root()
    cluster = PgCluster("shared", FAULT_PORT)
    try:
        cluster.create()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def fault_db(fault_cluster: PgCluster) -> Iterator[FaultDb]:
    """A fresh, empty database (the workers apply the migrations); dropped afterwards."""
    if not fault_cluster.running():
        fault_cluster.start()  # an earlier test failed with the server stopped
    name = fault_cluster.create_database()
    try:
        yield FaultDb(fault_cluster, name)
    finally:
        if not fault_cluster.running():
            fault_cluster.start()
        fault_cluster.drop_database(name)
