"""`python -m shepherd.demo`: the same as `shepherd demo`."""

from __future__ import annotations

import sys

from shepherd.demo import cli_main

raise SystemExit(cli_main(sys.argv[1:]))
