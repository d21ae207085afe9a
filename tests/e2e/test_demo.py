"""`shepherd demo`, run for real as `python -m shepherd.demo`: every order ends, also across a crash."""

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


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the demo to its end in `tmp_path`, with a clean SHEPHERD_* environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["TMPDIR"] = str(tmp_path)  # where the demo makes (and removes) its directory
    return subprocess.run(
        [sys.executable, "-m", "shepherd.demo", "--no-progress", "--json", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


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


def test_bad_options_are_refused(tmp_path: Path) -> None:
    completed = demo(tmp_path, "--slow-rate", "0.7", "--hang-rate", "0.7")
    assert completed.returncode == 2
    assert completed.stderr.startswith("error: ")
    assert "Traceback" not in completed.stderr


def test_help_works() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "shepherd.demo", "--help"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert completed.returncode == 0
    assert "--crash" in completed.stdout
    assert "--worker" not in completed.stdout


@pytest.mark.postgres
def test_the_demo_runs_on_postgresql_with_a_killed_worker(
    tmp_path: Path, postgres_url: str
) -> None:
    completed = demo(tmp_path, "--store", postgres_url, "--crash", "--orders", "90")
    summary = summary_of(completed, 90)
    assert summary["crash"] is not None
    assert summary["supervisor_recoveries"] >= 1
