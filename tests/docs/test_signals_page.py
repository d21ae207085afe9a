"""The signals how-to: its example is the file the session runs, and it prints what the page shows."""

from __future__ import annotations

import shutil

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

PAGE = DOCS / "howto" / "signals.md"
EXAMPLE = DOCS / "howto" / "signals_app.py"


def test_the_page_shows_the_whole_example() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert blocks == [EXAMPLE.read_text()]


@pytest.mark.slow
def test_the_example_prints_what_the_page_shows(session: Session) -> None:
    shutil.copy(EXAMPLE, session.cwd)
    steps = session_steps(PAGE.read_text())
    assert all(isinstance(step, Command) for step in steps)
    session.play(steps)
