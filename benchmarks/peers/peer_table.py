"""One table of shepherd's figures beside DBOS's from one `scripts/peer-bench` run, with ratios.

    python peer_table.py FILE.json...

Each file is either `python -m shepherd.bench --workloads W1apart,lone --json`'s
document or `dbos_driver.py run`'s (it says `"peer": "dbos"`); each names its
backend. Standard library only, so the project's tests can check it without
DBOS installed.

A ratio reads "how many times shepherd's figure is better": shepherd / DBOS for
a throughput, DBOS / shepherd for a latency.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any

BACKENDS = ("sqlite", "postgresql")
TITLES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}


def classify(documents: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The documents by (side, backend): side "shepherd" or "dbos"."""
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    for doc in documents:
        if doc.get("peer") == "dbos":
            key = ("dbos", str(doc["backend"]))
        else:
            key = ("shepherd", str(doc["workloads"]["W1apart"]["backend"]))
        if key in found:
            raise ValueError(f"two documents for {key[0]} on {key[1]}")
        found[key] = doc
    return found


def _lone_run(doc: Mapping[str, Any], mode: str) -> Mapping[str, Any]:
    """shepherd's lone run in `mode` ("in-process" or "apart")."""
    for run in doc["workloads"]["lone"]["runs"]:
        if run["mode"] == mode:
            return dict(run["latency"])
    raise ValueError(f"shepherd's lone figures have no {mode!r} run")


def figures(side: str, doc: Mapping[str, Any]) -> dict[str, float]:
    """The compared figures of one document: workflows/s and latencies in ms."""
    if side == "dbos":
        direct, queued = doc["lone"]["direct"], doc["lone"]["queued"]
        return {
            "w1": float(doc["W1"]["workflows_per_s"]),
            "lone_p50": 1000 * float(direct["p50_s"]),
            "lone_p99": 1000 * float(direct["p99_s"]),
            "queued_p50": 1000 * float(queued["p50_s"]),
        }
    apart, inproc = _lone_run(doc, "apart"), _lone_run(doc, "in-process")
    return {
        "w1": float(doc["workloads"]["W1apart"]["workflows_per_s"]),
        "lone_p50": 1000 * float(apart["p50_s"]),
        "lone_p99": 1000 * float(apart["p99_s"]),
        "inproc_p50": 1000 * float(inproc["p50_s"]),
        "inproc_p99": 1000 * float(inproc["p99_s"]),
    }


#: (label, shepherd's figure, DBOS's figure, higher is better, format).
ROWS = (
    ("W1 queued by a client process, workflows/s", "w1", "w1", True, "{:,.0f}"),
    (
        "lone p50 ms: shepherd client apart / DBOS in one process",
        "lone_p50",
        "lone_p50",
        False,
        "{:.1f}",
    ),
    (
        "lone p99 ms: shepherd client apart / DBOS in one process",
        "lone_p99",
        "lone_p99",
        False,
        "{:.1f}",
    ),
    ("lone p50 ms: both in one process", "inproc_p50", "lone_p50", False, "{:.1f}"),
    ("lone p99 ms: both in one process", "inproc_p99", "lone_p99", False, "{:.1f}"),
    (
        "lone p50 ms: shepherd client apart / DBOS through its queue",
        "lone_p50",
        "queued_p50",
        False,
        "{:.1f}",
    ),
)


def ratio(ours: float, theirs: float, *, higher_is_better: bool) -> float:
    """How many times shepherd's figure is better than DBOS's; NaN when either is missing."""
    num, den = (ours, theirs) if higher_is_better else (theirs, ours)
    if math.isnan(num) or math.isnan(den) or den <= 0:
        return math.nan
    return num / den


def _cell(fmt: str, value: float) -> str:
    return "—" if math.isnan(value) else fmt.format(value)


def render(documents: Iterable[Mapping[str, Any]]) -> str:
    """The Markdown table of every figure on each backend that has both sides, and the loads."""
    found = classify(documents)
    backends = [b for b in BACKENDS if ("shepherd", b) in found and ("dbos", b) in found]
    if not backends:
        raise ValueError("no backend has both a shepherd and a DBOS document")
    ours = {b: figures("shepherd", found["shepherd", b]) for b in backends}
    theirs = {b: figures("dbos", found["dbos", b]) for b in backends}
    head = ["figure"]
    for b in backends:
        head += [f"{TITLES[b]} shepherd", f"{TITLES[b]} DBOS", f"{TITLES[b]} ratio"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    for label, our_key, their_key, higher, fmt in ROWS:
        cells = [label]
        for b in backends:
            mine = ours[b].get(our_key, math.nan)
            peer = theirs[b].get(their_key, math.nan)
            cells += [
                _cell(fmt, mine),
                _cell(fmt, peer),
                _cell("{:.2f}x", ratio(mine, peer, higher_is_better=higher)),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    first = found["dbos", backends[0]]
    version = first.get("version", "?")
    enqueue = first.get("W1", {}).get("enqueue", "?")
    lines.append("")
    lines.append(
        f"ratio = how many times shepherd's figure is better (DBOS {version}, W1's enqueues: "
        f"{enqueue}); "
        "load average (1 min) at each start: "
        + ", ".join(
            f"{side} {TITLES[b]} {_load(found[side, b]):.2f}"
            for b in backends
            for side in ("shepherd", "dbos")
        )
    )
    return "\n".join(lines)


def _load(doc: Mapping[str, Any]) -> float:
    """The 1-minute load average a document recorded at its start; NaN when absent."""
    if "environment" in doc:
        return float(doc["environment"].get("load_average_1m_at_start", math.nan))
    load = doc.get("load_average")
    return float(load[0]) if load else math.nan


def main(argv: list[str]) -> int:
    """Print the table of the documents named in `argv`."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    docs = []
    for name in argv:
        with open(name, encoding="utf-8") as f:
            docs.append(json.load(f))
    print(render(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
