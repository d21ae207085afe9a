"""The parallel-steps how-to: its example is the file the test runs, and prints what it shows."""

from __future__ import annotations

import shutil

import pytest
from doctools import DOCS, Session, code_blocks, session_steps

PAGE = DOCS / "howto" / "parallel-steps.md"
EXAMPLE = DOCS / "howto" / "parallel_steps.py"


def test_the_page_shows_the_whole_example() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert EXAMPLE.read_text() in blocks


@pytest.mark.slow
def test_the_example_prints_what_the_page_shows(session: Session) -> None:
    shutil.copy(EXAMPLE, session.cwd)
    steps = session_steps(PAGE.read_text())
    assert [getattr(step, "line", None) for step in steps] == ["python parallel_steps.py"]
    session.play(steps)
