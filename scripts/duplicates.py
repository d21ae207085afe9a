"""The store's duplicate-code check: no code written twice across the SQLite and PostgreSQL backends.

Runs pylint's similarity checker (six similar lines or more; comments,
docstrings, imports and signatures aside) over src/shepherd/store and prints
every similar pair it finds. A pair with one side in `store/sqlite/` and the
other in `store/postgres/` fails the check: what both backends do is written
once, in `store/sql/` or a shared module (docs/design.md, "The store seam").
Migrations are SQL files, which pylint does not read.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("shepherd.store.sqlite.", "shepherd.store.postgres.")


def main() -> int:
    """Run the check; 0 if no pair spans both backends."""
    found = subprocess.run(
        [
            str(ROOT / ".venv/bin/pylint"),
            "--disable=all",
            "--enable=duplicate-code",
            "--min-similarity-lines=6",
            "--score=n",
            "src/shepherd/store",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode & ~8:  # 8: a refactoring message (R0801) was issued; anything else broke
        sys.stderr.write(found.stdout + found.stderr)
        return 1
    pairs = _pairs(found.stdout)
    across = [pair for pair in pairs if all(any(m.startswith(b) for m in pair) for b in BACKENDS)]
    for pair in pairs:
        mark = "FAIL" if pair in across else "note"
        print(f"duplicates: {mark}: similar lines in " + " and ".join(pair))
    if across:
        print(found.stdout)
        print(
            f"duplicates: {len(across)} similar pair(s) across store/sqlite and store/postgres: "
            "write what both backends do once (store/sql)"
        )
        return 1
    print(f"duplicates: no similar code across the backends ({len(pairs)} other pair(s))")
    return 0


def _pairs(report: str) -> list[tuple[str, ...]]:
    """The modules of each similarity pylint reported (`==module:[start:end]` lines)."""
    pairs: list[tuple[str, ...]] = []
    current: list[str] = []
    for line in report.splitlines():
        if "R0801" in line:
            if current:
                pairs.append(tuple(current))
            current = []
        elif line.startswith("=="):
            current.append(line[2:].split(":")[0])
    if current:
        pairs.append(tuple(current))
    return pairs


if __name__ == "__main__":
    sys.exit(main())
