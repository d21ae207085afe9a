"""The bench counts store transactions per workflow in every workload, and W1apart runs apart.

Counts, not times: each figure is the store's own count of its writer's
commits (`statistics()["commits"]`), in this process and in the worker apart,
which tells its own when asked (SIGUSR1). Run with tiny sizes on both backends.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

#: Tiny sizes: 40 workflows for W1 and W1apart, W4 20, W6 one rate for 1 s, lone 5 rounds.
TINY = (
    "--n", "40", "--w4-n", "20", "--w6-rates", "20", "--w6-seconds", "1", "--lone-n", "5",
    "--idle-seconds", "0",
)  # fmt: skip


def bench(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shepherd.bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _a_count(per_workflow: float, workflows: int) -> int:
    """The whole number of commits `per_workflow` stands for (it is a count, not a mean time)."""
    total = per_workflow * workflows
    assert math.isclose(total, round(total), abs_tol=1e-6), (per_workflow, workflows)
    return round(total)


def test_every_workload_counts_its_commits_per_workflow(shared_store: str) -> None:
    proc = bench(
        "--store", shared_store, "--workloads", "W1,W1apart,W4,W6,lone", *TINY, "--json"
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    workloads = json.loads(proc.stdout)["workloads"]

    w1 = workloads["W1"]
    assert w1["submit_stats"]["commits"] >= 1
    assert _a_count(w1["commits_per_workflow"], 40) == (
        w1["submit_stats"]["commits"] + w1["store_stats"]["commits"]
    )

    # W1apart: every workflow ended, and the worker's commits are counted with the
    # client's (the client alone committed only its submits).
    queued = workloads["W1apart"]
    assert (queued["n"], queued["processed"], queued["tasks_lost"]) == (40, 40, 0)
    assert queued["worker_exit"] is None
    assert queued["workflows_per_s"] > 0
    assert _a_count(queued["commits_per_workflow"], 40) > queued["client_stats"]["commits"]

    w4 = workloads["W4"]
    assert _a_count(w4["commits_per_workflow"], 20) > w4["client_stats"]["commits"]

    [rate] = workloads["W6"]["rates"]
    assert _a_count(rate["commits_per_workflow"], rate["acknowledged"]) >= 1

    # A lone workflow commits more than its submit: its claim, its steps and its
    # finish, in one process or in the worker apart.
    lone = workloads["lone"]
    for run in lone["runs"]:
        assert _a_count(run["commits_per_workflow"], 5) >= 2 * 5, run["mode"]
    bare = lone["bare_commit"]
    assert bare["n"] == 5
    assert 0 < bare["p50_s"] <= bare["max_s"]


def test_w1apart_and_the_counts_show_in_the_tables() -> None:
    proc = bench("--workloads", "W1apart,lone", *TINY)
    assert proc.returncode == 0, proc.stderr
    for shown in (
        "W1apart: a client queues the workflows",
        "store commits per workflow (client + worker)",
        "store commits per workflow",
        "bare write commit, same store",
        "submit mean / bare commit mean",
    ):
        assert shown in proc.stdout, shown
