"""The shepherd benchmark: `shepherd bench` (or `python -m shepherd.bench`).

W1: three no-op steps per workflow; W2: three 10 ms steps; W3: a worker
process SIGKILLed mid-run and recovered by the supervisor; soak (only when
asked for): minutes of steady submits with retention on, workers SIGKILLed in
turn and, on PostgreSQL, the server restarted.
"""

from __future__ import annotations

from shepherd.bench.cli import bench

__all__ = ["bench"]
