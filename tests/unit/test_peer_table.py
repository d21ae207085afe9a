"""scripts/peer-bench's table: shepherd's figures beside DBOS's, and the ratios between them.

The table's code (benchmarks/peers/peer_table.py) is loaded from its file: it is no
part of the package, and the DBOS driver beside it is not imported at all (DBOS is
installed only in the peer's own virtualenv).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

PATH = Path(__file__).parents[2] / "benchmarks" / "peers" / "peer_table.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("peer_table", PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


peer_table = _load()


def _latency(p50_ms: float, p99_ms: float) -> dict[str, float]:
    return {"n": 200, "mean_s": p50_ms / 1000, "p50_s": p50_ms / 1000, "p99_s": p99_ms / 1000}


def shepherd_doc(backend: str, *, w1: float, apart_p50: float, inproc_p50: float) -> dict[str, Any]:
    """The parts of `python -m shepherd.bench --workloads W1apart,lone --json` the table reads."""
    return {
        "environment": {"load_average_1m_at_start": 0.25},
        "workloads": {
            "W1apart": {"backend": backend, "workflows_per_s": w1},
            "lone": {
                "runs": [
                    {"mode": "in-process", "latency": _latency(inproc_p50, 2 * inproc_p50)},
                    {"mode": "apart", "latency": _latency(apart_p50, 2 * apart_p50)},
                ]
            },
        },
    }


def dbos_doc(backend: str, *, w1: float, p50: float, queued_p50: float) -> dict[str, Any]:
    """The parts of `dbos_driver.py run`'s document the table reads."""
    return {
        "peer": "dbos",
        "version": "3.4.0",
        "backend": backend,
        "load_average": [0.5, 0.4, 0.3],
        "W1": {"workflows_per_s": w1, "enqueue": "loop"},
        "lone": {"direct": _latency(p50, 3 * p50), "queued": _latency(queued_p50, queued_p50)},
    }


def _row(table: str, label: str) -> list[str]:
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in\n{table}")


def test_ratios_read_as_times_better_on_each_backend() -> None:
    table = peer_table.render(
        [
            dbos_doc("postgresql", w1=250.0, p50=6.0, queued_p50=1000.0),
            shepherd_doc("sqlite", w1=2000.0, apart_p50=4.0, inproc_p50=5.0),
            shepherd_doc("postgresql", w1=1500.0, apart_p50=8.0, inproc_p50=6.0),
            dbos_doc("sqlite", w1=200.0, p50=8.0, queued_p50=1000.0),
        ]
    )
    head = table.splitlines()[0]
    assert head.index("SQLite shepherd") < head.index("PostgreSQL shepherd")
    # Throughput: shepherd / DBOS; latency: DBOS / shepherd, so above 1 is shepherd ahead.
    assert _row(table, "W1 queued by a client process, workflows/s") == [
        "2,000",
        "200",
        "10.00x",
        "1,500",
        "250",
        "6.00x",
    ]
    assert _row(table, "lone p50 ms: shepherd client apart / DBOS in one process") == [
        "4.0",
        "8.0",
        "2.00x",
        "8.0",
        "6.0",
        "0.75x",
    ]
    assert _row(table, "lone p99 ms: both in one process")[:3] == ["10.0", "24.0", "2.40x"]
    assert (
        _row(table, "lone p50 ms: shepherd client apart / DBOS through its queue")[2] == "250.00x"
    )
    assert "DBOS 3.4.0, W1's enqueues: loop" in table
    assert "shepherd SQLite 0.25, dbos SQLite 0.50" in table


def test_a_backend_without_both_sides_is_left_out() -> None:
    table = peer_table.render(
        [
            shepherd_doc("sqlite", w1=2000.0, apart_p50=4.0, inproc_p50=5.0),
            dbos_doc("sqlite", w1=200.0, p50=8.0, queued_p50=1000.0),
            shepherd_doc("postgresql", w1=1500.0, apart_p50=8.0, inproc_p50=6.0),
        ]
    )
    assert "SQLite DBOS" in table
    assert "PostgreSQL" not in table


def test_documents_that_cannot_be_paired_are_refused() -> None:
    one = shepherd_doc("sqlite", w1=2000.0, apart_p50=4.0, inproc_p50=5.0)
    with pytest.raises(ValueError, match="two documents for shepherd on sqlite"):
        peer_table.render([one, one])
    with pytest.raises(ValueError, match="no backend has both"):
        peer_table.render([one])


def test_a_missing_figure_shows_as_a_dash_not_a_ratio() -> None:
    assert math.isnan(peer_table.ratio(float("nan"), 2.0, higher_is_better=True))
    assert math.isnan(peer_table.ratio(0.0, 2.0, higher_is_better=False))
    table = peer_table.render(
        [
            shepherd_doc("sqlite", w1=float("nan"), apart_p50=4.0, inproc_p50=5.0),
            dbos_doc("sqlite", w1=200.0, p50=8.0, queued_p50=1000.0),
        ]
    )
    assert _row(table, "W1 queued by a client process, workflows/s") == ["—", "200", "—"]
