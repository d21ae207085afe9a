"""The benchmark runs end to end with tiny sizes: every workload, no task lost; bad options refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def shepherd_bench(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `shepherd bench ARGS` to its end."""
    return subprocess.run(
        [sys.executable, "-m", "shepherd", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_bench_runs_every_workload_and_loses_nothing() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd.bench", "--n", "50", "--w3-n", "30", "--json"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    workloads = report["workloads"]
    assert set(workloads) == {"W1", "W2", "W3"}
    for name in ("W1", "W2"):
        assert workloads[name]["n"] == 50
        assert workloads[name]["processed"] == 50
        assert workloads[name]["tasks_lost"] == 0
    w3 = workloads["W3"]
    assert w3["n"] == 30
    assert w3["tasks_lost"] == 0
    assert w3["tasks_charged"] == 0
    assert w3["processed"] == 30
    # Every step ran at least once; a crash may only add executions, never drop one.
    assert w3["distinct_steps"] == 3 * 30
    assert w3["executions"] >= w3["distinct_steps"]
    assert {t["workload"] for t in report["targets"]} == {"W1", "W2", "W3"}


def test_bench_w3_charges_no_task_a_failure_for_the_kill(shared_store: str) -> None:
    """W3 on each backend: the killed worker's tasks finish, none charged a failure."""
    proc = shepherd_bench(
        "--workloads", "W3", "--w3-n", "100", "--store", shared_store, "--json", timeout=110
    )
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    w3 = report.get("workloads", {}).get("W3", {})
    shown = {k: v for k, v in w3.items() if not isinstance(v, dict)}
    assert proc.returncode == 0, f"{shown}\n{proc.stderr}"
    print(
        f"W3 ({shared_store.split(':')[0]}): {w3['tasks_charged']} of {w3['n']} tasks charged a "
        f"failure; {w3['claimed_at_kill']} claimed by the killed worker; "
        f"{w3['duplicated_executions']} executions twice"
    )
    assert (w3["processed"], w3["tasks_lost"]) == (100, 0)
    assert w3["claimed_at_kill"] > 0, "the kill must strand claims"
    assert w3["tasks_charged"] == 0, w3
    # Counted by the stores: the submission's, the supervisor's and both workers'
    # commits; the killed worker told its own just before the kill.
    killed = w3["killed_stats"]["commits"]
    assert killed > 0
    assert w3["commits_per_workflow"] * 100 >= killed + w3["worker_stats"]["commits"]
    (target,) = (t for t in report["targets"] if t["workload"] == "W3")
    assert "0 charged a failure" in target["target"]


def test_bench_capacity_holds_no_more_slots_than_the_capacity() -> None:
    proc = shepherd_bench(
        "--workloads", "capacity", "--n", "50", "--capacity", "5", "--sleep", "0.005", "--json"
    )
    assert proc.returncode == 0, proc.stderr
    capacity = json.loads(proc.stdout)["workloads"]["capacity"]
    assert (capacity["processed"], capacity["tasks_lost"]) == (50, 0)
    assert capacity["capacity"] == 5
    assert 1 <= capacity["most_holders"] <= 5


def test_bench_event_writer_writes_every_acknowledged_event_once() -> None:
    proc = shepherd_bench("--workloads", "W5", "--w5-n", "400", "--w5-producers", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    w5 = json.loads(proc.stdout)["workloads"]["W5"]
    assert (w5["batched"]["events"], w5["unbatched"]["events"]) == (400, 40)
    for run in (w5["batched"], w5["unbatched"]):
        assert (run["lost"], run["duplicated"]) == (0, 0)
        assert run["events_per_s"] > 0
        assert run["commits_per_event"] > 0
    assert w5["keys"] == 8


def test_bench_steps_through_an_owner_batched_and_not() -> None:
    """W7: every workflow processed, its step's line in its key's file once; the
    batching owner handles the steps in fewer handlings than the one-at-a-time owner."""
    proc = shepherd_bench("--workloads", "W7", "--w7-n", "50", "--json")
    assert proc.returncode == 0, proc.stderr
    w7 = json.loads(proc.stdout)["workloads"]["W7"]
    assert (w7["keys"], w7["max_items"], w7["fsync"]) == (8, 200, True)
    batched, unbatched = w7["batched"], w7["unbatched"]
    for run in (batched, unbatched):
        assert (run["n"], run["processed"], run["tasks_lost"]) == (50, 50, 0)
        assert (run["items"], run["missing_lines"], run["lines_twice"]) == (50, 0, 0)
        assert run["workflows_per_s"] > 0
    assert unbatched["handlings"] == 50
    assert unbatched["biggest_batch"] == 1
    assert batched["handlings"] < 50
    assert w7["speedup"] > 0
    # The reference: the same workflows through a plain agent that does nothing.
    plain = w7["plain"]
    assert (plain["plain"], plain["n"], plain["processed"], plain["tasks_lost"]) == (
        True,
        50,
        50,
        0,
    )
    assert (plain["handlings"], plain["missing_lines"]) == (50, 0)
    assert plain["workflows_per_s"] > 0
    (target,) = (t for t in json.loads(proc.stdout)["targets"] if t["workload"].startswith("W7"))
    assert "0 lost" in target["measured"]


def test_bench_sleepers_wake_every_task_and_report_the_idle_cpu() -> None:
    """sleepers: every task wakes, its lateness and the idle CPU reported, in the table too."""
    args = ("--workloads", "sleepers", "--sleepers-n", "50", "--sleepers-spread", "1")
    proc = shepherd_bench(*args, "--sleepers-lead", "2.5", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    figures = document["workloads"]["sleepers"]
    assert (figures["n"], figures["woken"], figures["spread_s"]) == (50, 50, 1.0)
    assert 0 <= figures["lateness_p50_s"] <= figures["lateness_p99_s"] <= figures["lateness_max_s"]
    assert figures["idle_cpu_while_asleep"] is None or figures["idle_cpu_while_asleep"] >= 0
    cpu, woken = (t for t in document["targets"] if t["workload"] == "sleepers")
    assert "idle worker's CPU" in cpu["target"]
    assert woken["measured"].endswith(", 0 lost")


def test_bench_signal_delivers_every_signal_sent_from_another_process() -> None:
    """signal: each wait gets its signal from the sender process; the latency is reported."""
    proc = shepherd_bench("--workloads", "signal", "--signal-n", "5", "--json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    figures = document["workloads"]["signal"]
    assert (figures["n"], figures["delivered"], figures["worker_exit"]) == (5, 5, None)
    assert 0 < figures["latency_p50_ms"] <= figures["latency_p99_ms"] <= figures["latency_max_ms"]
    (target,) = (t for t in document["targets"] if t["workload"] == "signal")
    assert target["measured"].endswith(", 0 lost")


def test_bench_prints_tables_without_json() -> None:
    proc = shepherd_bench("--workloads", "w1", "--n", "20")
    assert proc.returncode == 0, proc.stderr
    assert "workflows/s" in proc.stdout
    assert "Targets" in proc.stdout


def test_bench_does_not_take_its_store_from_the_environment(tmp_path: Path) -> None:
    # The bench writes thousands of tasks: only an explicit --store sends them elsewhere.
    elsewhere = tmp_path / "app.db"
    proc = shepherd_bench(
        "--workloads", "W1", "--n", "20", "--json",
        env={"SHEPHERD_STORE": f"sqlite:///{elsewhere}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["environment"]["store"] == "sqlite (fresh file per workload)"
    assert not elsewhere.exists()


def test_bench_takes_the_store_given_before_the_command(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'given.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd", "--store", store, "bench", "--workloads", "W1",
         "--n", "20", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["environment"]["store"] == store
    assert (tmp_path / "given.db").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--workloads", "W9"), "--workloads"),
        (("--workloads", ","), "--workloads"),
        (("--n", "0"), "--n"),
        (("--w3-n", "ten"), "--w3-n"),
        (("--synchronous", "OFF"), "--synchronous"),
        (("--sleep", "-0.1"), "--sleep"),
        (("--minutes", "0"), "--minutes"),
        (("--kill-every", "nan"), "--kill-every"),
        (("--w4-n", "0"), "--w4-n"),
        (("--w7-n", "0"), "--w7-n"),
        (("--sleepers-n", "0"), "--sleepers-n"),
        (("--sleepers-spread", "nan"), "--sleepers-spread"),
        (("--signal-n", "0"), "--signal-n"),
        (("--w6-rates", "100,fast"), "--w6-rates"),
        (("--w6-rates", "0"), "--w6-rates"),
        (("--w6-rates", "inf"), "--w6-rates"),
        (("--w6-seconds", "nan"), "--w6-seconds"),
        (("--lone-n", "-1"), "--lone-n"),
        (("--idle-seconds", "-1"), "--idle-seconds"),
        (("--log-level-for", "httpx"), "--log-level-for"),
    ],
)
def test_bench_refuses_bad_values_naming_the_option(args: tuple[str, ...], named: str) -> None:
    proc = shepherd_bench(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: Invalid value for '{named}'")
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stdout == ""


def test_bench_rejects_an_unknown_workload() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd.bench", "--workloads", "W9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        "unknown workload 'W9'; choose from W1, W2, W3, W4, W5, W6, W7, lone, soak" in proc.stderr
    )


def test_bench_help_lists_the_options() -> None:
    proc = shepherd_bench("--help")
    assert proc.returncode == 0
    for option in (
        "--store", "--workloads", "--n", "--w3-n", "--capacity", "--w4-n", "--w6-rates", "--w6-seconds",
        "--w7-n", "--w7-fsync", "--sleepers-n", "--sleepers-spread", "--sleepers-lead",
        "--lone-n", "--idle-seconds", "--synchronous", "--json", "--sleep",
        "--max-in-flight", "--agent-concurrency", "--claim-batch", "--w3-within",
        "--w3-interval", "--w3-in-flight", "--timeout", "--minutes", "--rate",
        "--soak-retention", "--kill-every", "--restart-every", "--restart-command",
        "--log-level", "--log-level-for",
    ):  # fmt: skip
        assert f"  {option} " in proc.stdout
