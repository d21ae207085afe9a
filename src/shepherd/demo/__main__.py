"""`python -m shepherd.demo`: the same as `shepherd demo` (its `--crash` worker runs this way)."""

from __future__ import annotations

import sys

from shepherd.cli import main

main(["demo", *sys.argv[1:]])
