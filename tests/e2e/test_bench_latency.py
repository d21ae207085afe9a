"""W4, W6 and lone run end to end with tiny sizes, on both backends; their worker processes never outlive them."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.processes import as_from_a_terminal

pytestmark = pytest.mark.slow

#: Tiny sizes: W4 20 workflows, W6 one rate for 1 s, lone 5 rounds in each mode.
TINY = (
    "--w4-n", "20", "--w6-rates", "20", "--w6-seconds", "1", "--lone-n", "5",
    "--idle-seconds", "0.5",
)  # fmt: skip
#: Seconds a polled condition may take before the test fails.
WITHIN = 60.0
APART_APP = "shepherd.bench.apart_app:app"


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shepherd.bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_latency_workloads_report_their_figures_and_lose_nothing(shared_store: str) -> None:
    proc = bench("--store", shared_store, "--workloads", "W4,W6,lone", *TINY, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    workloads = report["workloads"]
    assert set(workloads) == {"W4", "W6", "lone"}
    backend = "postgresql" if shared_store.startswith("postgresql") else "sqlite"

    w4 = workloads["W4"]
    assert (w4["backend"], w4["n"], w4["submitted"], w4["processed"]) == (backend, 20, 20, 20)
    assert (w4["tasks_lost"], w4["failed"], w4["worker_exit"]) == (0, 0, None)
    assert w4["submit"]["n"] == 20
    assert w4["workflows_per_s"] > 0

    w6 = workloads["W6"]
    assert (w6["tasks_lost"], w6["worker_exit"]) == (0, None)
    [rate] = w6["rates"]
    assert rate["rate"] == 20
    assert rate["arrivals"] > 0
    assert rate["acknowledged"] == rate["processed"] == rate["arrivals"]
    assert (rate["tasks_lost"], rate["submit_errors"], rate["result_errors"]) == (0, {}, {})
    assert rate["latency"]["n"] == rate["processed"]

    lone = workloads["lone"]
    assert [run["mode"] for run in lone["runs"]] == ["in-process", "apart"]
    for run in lone["runs"]:
        assert (run["n"], run["processed"], run["tasks_lost"]) == (5, 5, 0)
        assert run["latency"]["n"] == run["submit"]["n"] == run["engine"]["n"] == 5
        assert run["worker_exit"] is None
    assert lone["tasks_lost"] == 0
    assert lone["worker_idle_cpu"] is not None

    targets = {t["workload"] for t in report["targets"]}
    assert targets == {"W4", "W6 20/s", "lone in-process", "lone apart"}


def test_latency_workloads_print_tables_without_json() -> None:
    proc = bench("--workloads", "W4,W6,lone", *TINY)
    assert proc.returncode == 0, proc.stderr
    for title in ("W4: one client", "W6: open loop", "lone: one workflow at a time", "Targets"):
        assert title in proc.stdout


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _is_worker(pid: int) -> bool:
    try:
        return APART_APP in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _tasks(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM tasks").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def _start_long_w4(db: Path) -> tuple[subprocess.Popen[str], int]:
    """A W4 run far too long to end by itself; once its worker runs and it submits: (it, worker)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "shepherd.bench", "--store", f"sqlite:///{db}",
         "--workloads", "W4", "--w4-n", "10000000", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    deadline = time.monotonic() + WITHIN
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = [p for p in _children(proc.pid) if _is_worker(p)]
        if workers and _tasks(db) > 0:
            return proc, workers[0]
        time.sleep(0.05)  # polling /proc and the store, with a deadline
    proc.kill()
    _, err = proc.communicate(timeout=WITHIN)
    pytest.fail(f"the W4 worker did not start, or nothing was submitted; stderr:\n{err}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_bench_stops_its_worker(tmp_path: Path, sig: signal.Signals) -> None:
    proc, worker = _start_long_w4(tmp_path / "w4.db")
    try:
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WITHIN)
    assert proc.returncode != 0
    assert "interrupted" in err
    deadline = time.monotonic() + WITHIN
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)  # a process just killed may take a moment to go
    assert not _alive(worker), "the bench's worker outlived it"


def test_a_worker_that_dies_ends_the_workload_and_fails_the_bench(tmp_path: Path) -> None:
    proc, worker = _start_long_w4(tmp_path / "w4.db")
    try:
        os.kill(worker, signal.SIGKILL)
        out, err = proc.communicate(timeout=WITHIN)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=WITHIN)
    assert proc.returncode == 1, err
    w4 = json.loads(out)["workloads"]["W4"]
    assert w4["worker_exit"] == -signal.SIGKILL
    assert 0 < w4["submitted"] < 10_000_000
    assert "W4: the worker exited with -9 before the end" in err
