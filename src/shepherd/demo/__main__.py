"""`python -m shepherd.demo`: the same as `shepherd demo` (its `--crash` worker runs this way)."""

from __future__ import annotations

from shepherd.console import main
from shepherd.demo.cli import demo

main(demo, None, prog_name="shepherd demo")
