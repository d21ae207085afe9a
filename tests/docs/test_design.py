"""docs/design.md: every code excerpt names its file and stands in it as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "design.md"


def _excerpts() -> list[tuple[str, str]]:
    found = []
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S):
        lines = block.splitlines()
        indent = len(lines[0]) - len(lines[0].lstrip())
        lines = [line[indent:] for line in lines]
        assert lines[0].startswith(("# src/", "# tests/")), (
            f"an excerpt must name its file: {lines[0]!r}"
        )
        found.append((lines[0][2:], "\n".join(lines[1:]).rstrip() + "\n"))
    return found


def test_the_page_has_the_store_operation_walkthrough() -> None:
    assert len(_excerpts()) >= 5


def test_every_excerpt_is_in_its_file_as_written() -> None:
    for path, text in _excerpts():
        assert text in (ROOT / path).read_text(), f"{path} no longer holds:\n{text}"
