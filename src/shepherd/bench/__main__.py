"""`python -m shepherd.bench`: the same as `shepherd bench`."""

from __future__ import annotations

import sys

from shepherd.cli import main

main(["bench", *sys.argv[1:]])
