"""The task list benchmark runs end to end with a tiny store, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from shepherd.bench.listing import PAGE, filters
from shepherd.bench.listing_fill import Filled

pytestmark = pytest.mark.slow

_T = datetime(2026, 1, 1, tzinfo=UTC)


def _listing(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shepherd.bench.listing", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _checked(report: dict[str, Any], tasks: int) -> None:
    by_name = {t["name"]: t for t in report["timings"]}
    named = filters(Filled(tasks=0, middle_id="0", middle_key="k", first_at=_T, last_at=_T))
    assert set(by_name) == {*named, "count_tasks", "throughput (1h)"}
    # The filled store answers every filter: lookups find the one task they name.
    assert by_name["no filter"]["rows"] == PAGE
    assert by_name["key"]["rows"] == 1
    assert by_name["id (20)"]["rows"] == 1
    assert by_name["state=processed"]["rows"] == PAGE
    # Each page is read with its count (exact up to 10,000) and the count alone is timed too.
    assert by_name["no filter"]["count"] == f"{tasks:,}"
    assert (by_name["key"]["count"], by_name["id (20)"]["count"]) == ("1", "1")
    assert all(by_name[name]["count_p50_ms"] is not None for name in named)
    assert by_name["count_tasks"]["count_p50_ms"] is None
    # A deep page is timed where that many pages match, and only there.
    assert by_name["no filter"]["deep_p50_ms"] is not None
    assert by_name["key"]["deep_p50_ms"] is None
    assert all(t["first_p50_ms"] >= 0 for t in report["timings"])
    assert report["fill_s"] >= 0
    assert tasks > PAGE * 3


def test_the_listing_benchmark_fills_and_times_a_sqlite_store() -> None:
    proc = _listing("--tasks", "2000", "--depth", "3", "--repeat", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    _checked(json.loads(proc.stdout), 2000)


def test_the_listing_benchmark_fills_and_times_a_postgres_store(postgres_url: str) -> None:
    proc = _listing(
        "--tasks", "2000", "--depth", "3", "--repeat", "1", "--json", "--store", postgres_url
    )
    assert proc.returncode == 0, proc.stderr
    _checked(json.loads(proc.stdout), 2000)


def test_the_table_names_every_read() -> None:
    proc = _listing("--tasks", "300", "--depth", "2", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("300 tasks filled in ")
    for name in ("no filter", "state=error", "id prefix (8)", "count_tasks"):
        assert f"| {name} |" in proc.stdout
    assert "| count alone (ms) |" in proc.stdout
    assert "| 300 |" in proc.stdout  # the count of "no filter"


def test_a_store_that_holds_tasks_is_refused(postgres_url: str) -> None:
    assert (
        _listing(
            "--tasks", "300", "--depth", "2", "--repeat", "1", "--store", postgres_url
        ).returncode
        == 0
    )
    again = _listing("--tasks", "300", "--store", postgres_url)
    assert again.returncode != 0
    assert "holds tasks already" in again.stderr


@pytest.mark.parametrize("args", [["--tasks", "0"], ["--depth", "1"], ["--repeat", "0"]])
def test_bad_sizes_are_refused(args: list[str]) -> None:
    proc = _listing(*args)
    assert proc.returncode == 2
    assert "must be at least" in proc.stderr
