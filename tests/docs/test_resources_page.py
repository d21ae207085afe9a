"""The resources how-to: its examples are the files the session runs, and every command prints what it shows."""

from __future__ import annotations

import shutil

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

PAGE = DOCS / "howto" / "resources.md"
EXAMPLES = [
    DOCS / "howto" / "resources_app.py",
    DOCS / "howto" / "capacity_app.py",
    DOCS / "howto" / "static_resolver.py",
]


def test_the_page_shows_the_whole_examples() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert blocks == [example.read_text() for example in EXAMPLES]


@pytest.mark.slow
def test_every_command_prints_what_the_page_shows(session: Session) -> None:
    for example in EXAMPLES:
        shutil.copy(example, session.cwd)
    steps = session_steps(PAGE.read_text())
    assert all(isinstance(step, Command) for step in steps)
    assert len(steps) == 19
    session.play(steps)
