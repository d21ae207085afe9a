"""The logs-and-top how-to: its example is the file the session runs, the worker logs
the JSON lines the page shows, and `shepherd top --once` prints the frame it shows."""

from __future__ import annotations

import shutil

import pytest
from doctools import DOCS, Command, LogLines, Session, code_blocks, session_steps

PAGE = DOCS / "howto" / "logs-and-top.md"
EXAMPLE = DOCS / "howto" / "logs_app.py"


def test_the_page_shows_the_whole_example() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert blocks == [EXAMPLE.read_text()]


@pytest.mark.slow
def test_every_command_prints_what_the_page_shows(session: Session) -> None:
    shutil.copy(EXAMPLE, session.cwd)
    steps = session_steps(PAGE.read_text())
    assert [type(step) for step in steps] == [Command, Command, LogLines, Command]
    session.play(steps)
