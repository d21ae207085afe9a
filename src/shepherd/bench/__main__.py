"""`python -m shepherd.bench`: the same as `shepherd bench`."""

from __future__ import annotations

from shepherd.bench.cli import bench
from shepherd.console import main

main(bench, None, prog_name="shepherd bench")
