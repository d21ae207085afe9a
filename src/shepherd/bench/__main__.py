"""`python -m shepherd.bench`."""

from __future__ import annotations

import sys

from shepherd.bench.cli import cli_main

raise SystemExit(cli_main(sys.argv[1:]))
