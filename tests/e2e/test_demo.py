"""`shepherd demo`, run for real: every order ends, also across a crash; its options are checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: Seconds one demo run may take before the test fails (it takes a few).
RUN_TIMEOUT = 240.0
ENDED = ("processed", "compensated", "cancelled", "error")


def shepherd_demo(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, merge: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `shepherd demo ARGS` to its end in `tmp_path`, with a clean SHEPHERD_* environment.

    With `merge`, stderr goes into stdout's pipe, as `2>&1 | less` would see it.
    """
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    clean["TMPDIR"] = str(tmp_path)  # where the demo makes (and removes) its directory
    return subprocess.run(
        [sys.executable, "-m", "shepherd", "demo", *args],
        cwd=tmp_path,
        env={**clean, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge else subprocess.PIPE,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def demo(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the demo for a script: its summary as JSON, no progress bar."""
    return shepherd_demo(tmp_path, "--no-progress", "--json", *args, env=env)


def summary_of(
    completed: subprocess.CompletedProcess[str], orders: int, *, some_processed: bool = True
) -> dict[str, Any]:
    """The JSON summary of a successful run, checked for the invariants every run keeps."""
    assert completed.returncode == 0, (completed.stdout, completed.stderr)
    summary: dict[str, Any] = json.loads(completed.stdout)
    states = summary["states"]
    assert summary["orders"] == orders
    assert summary["all_terminal"] is True
    assert sum(states[s] for s in ENDED) == orders
    assert summary["terminal"] == orders
    assert states["pending"] == states["processing"] == states["compensating"] == 0
    assert states["processed"] > 0 or not some_processed
    for state in ("compensated", "cancelled", "error"):
        assert sum(summary["reasons"][state].values()) == states[state]
    assert summary["consistent"] is True, summary["consistency_problems"]
    assert summary["completed_steps"] >= 3 * states["processed"]
    return summary


def test_every_order_ends(tmp_path: Path) -> None:
    summary = summary_of(demo(tmp_path, "--orders", "60"), 60)
    assert summary["crash"] is None
    # The demo's temporary directory (store, ledger, logs) is gone.
    assert not list(tmp_path.glob("shepherd-demo-*"))


def test_declines_are_compensated(tmp_path: Path) -> None:
    completed = demo(
        tmp_path, "--orders", "30", "--decline-rate", "1", "--transient-rate", "0.2",
        "--slow-rate", "0", "--hang-rate", "0",
    )  # fmt: skip
    summary = summary_of(completed, 30, some_processed=False)
    assert summary["states"]["compensated"] == 30
    assert summary["faults"]["declined"] == 30
    assert list(summary["reasons"]["compensated"]) == [
        "step 2 (payments.charge) failed permanently: card declined"
    ]


def test_a_killed_worker_is_recovered(tmp_path: Path) -> None:
    summary = summary_of(demo(tmp_path, "--crash", "--orders", "90", "--keep"), 90)
    crash = summary["crash"]
    assert crash is not None
    assert 30 <= crash["orders_ended_at_kill"] < 90
    assert summary["supervisor_recoveries"] >= 1
    kept = Path(summary["kept"]["directory"])
    assert (kept / "worker-1.log").exists()
    assert (kept / "worker-2.log").exists()


def test_the_crash_note_ends_its_line_before_the_table(tmp_path: Path) -> None:
    # The progress view's last frame, on a pipe, then the summary table: each starts a line.
    completed = shepherd_demo(tmp_path, "--crash", "--orders", "60", merge=True)

    assert completed.returncode == 0, completed.stdout
    lines = completed.stdout.splitlines()
    notes = [line for line in lines if "killed (SIGKILL)" in line]
    assert len(notes) == 1, completed.stdout
    assert notes[0].rstrip().endswith("took over"), notes[0]
    assert "shepherd demo: order processing" in [line.strip() for line in lines]
    assert completed.stdout.index(notes[0]) < completed.stdout.index("shepherd demo: order")


def test_the_log_levels_reach_the_crash_worker(tmp_path: Path) -> None:
    summary = summary_of(
        demo(
            tmp_path, "--crash", "--orders", "60", "--keep",
            "--log-level", "warning", "--log-level-for", "asyncio=debug",
        ),
        60,
    )  # fmt: skip
    kept = Path(summary["kept"]["directory"])
    worker_log = (kept / "worker-1.log").read_text()
    # asyncio logs its event loop's selector at DEBUG, and only --log-level-for lets it through.
    assert "Using selector" in worker_log
    assert not [line for line in worker_log.splitlines() if "INFO" in line]


def test_the_deadline_ends_the_run_with_exit_code_5(tmp_path: Path) -> None:
    # Every call hangs until its 1 s window ends, so no order can end within 0.5 s.
    completed = demo(
        tmp_path, "--orders", "20", "--deadline", "0.5", "--hang-rate", "1",
        "--transient-rate", "0", "--slow-rate", "0", "--decline-rate", "0",
    )  # fmt: skip

    assert completed.returncode == 5, (completed.stdout, completed.stderr)
    assert json.loads(completed.stdout)["all_terminal"] is False
    assert "error: not every order ended within the 0.5 s deadline" in completed.stderr


def test_a_store_that_holds_tasks_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'used.db'}"
    summary_of(demo(tmp_path, "--orders", "5", "--store", store), 5)

    again = demo(tmp_path, "--orders", "5", env={"SHEPHERD_STORE": store})

    assert again.returncode == 2
    assert again.stderr.startswith("error: Invalid value for '--store' (from SHEPHERD_STORE): ")
    assert "already holds tasks" in again.stderr


def test_the_store_may_be_given_before_the_command(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'given.db'}"
    completed = subprocess.run(
        [sys.executable, "-m", "shepherd", "--store", store, "demo", "--orders", "5",
         "--no-progress", "--json", "--keep"],
        cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert summary_of(completed, 5)["kept"]["store"] == store
    assert (tmp_path / "given.db").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--orders", "0"), "--orders"),
        (("--orders", "many"), "--orders"),
        (("--decline-rate", "1.5"), "--decline-rate"),
        (("--transient-rate", "nan"), "--transient-rate"),
        (("--slow-rate", "0.7", "--hang-rate", "0.7"), "--slow-rate"),
        (("--deadline", "0"), "--deadline"),
        (("--seed", "x"), "--seed"),
        (("--log-level", "loud"), "--log-level"),
        (("--log-level-for", "asyncio"), "--log-level-for"),
    ],
)
def test_bad_values_are_refused_naming_the_option(
    tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    completed = shepherd_demo(tmp_path, "--no-progress", *args)

    assert completed.returncode == 2
    assert completed.stderr.startswith("error: Invalid value for ")
    assert f"'{named}'" in completed.stderr
    assert len(completed.stderr.splitlines()) == 1
    assert completed.stdout == ""


def test_help_lists_the_options(tmp_path: Path) -> None:
    completed = shepherd_demo(tmp_path, "--help")

    assert completed.returncode == 0
    for option in (
        "--orders", "--store", "--keep", "--crash", "--transient-rate", "--slow-rate",
        "--hang-rate", "--decline-rate", "--seed", "--deadline", "--json", "--no-progress",
        "--log-level", "--log-level-for", "SHEPHERD_STORE",
    ):  # fmt: skip
        assert option in completed.stdout
    assert "--worker" not in completed.stdout


def test_python_m_shepherd_demo_is_the_same_command() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "shepherd.demo", "--help"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert completed.returncode == 0
    assert completed.stdout.startswith("Usage: shepherd demo [OPTIONS]")
    assert "--crash" in completed.stdout


@pytest.mark.postgres
def test_the_demo_runs_on_postgresql_with_a_killed_worker(
    tmp_path: Path, postgres_url: str
) -> None:
    completed = demo(tmp_path, "--store", postgres_url, "--crash", "--orders", "90")
    summary = summary_of(completed, 90)
    assert summary["crash"] is not None
    assert summary["supervisor_recoveries"] >= 1
