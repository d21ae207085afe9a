"""`python -m shepherd`: the same as the `shepherd` command."""

from __future__ import annotations

from shepherd.cli import main

if __name__ == "__main__":
    main()
