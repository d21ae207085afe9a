"""The how-tos of delayed tasks, deadlines, schedules, sleep and child workflows: each example is
the file the session runs,
and it prints what its page shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

#: (page, the one example it shows and runs)
PAGES = [
    (DOCS / "howto" / "delayed-tasks.md", DOCS / "howto" / "delayed_app.py"),
    (DOCS / "howto" / "deadlines.md", DOCS / "howto" / "deadline_app.py"),
    (DOCS / "howto" / "schedules.md", DOCS / "howto" / "schedules_app.py"),
    (DOCS / "howto" / "sleep.md", DOCS / "howto" / "sleep_app.py"),
    (DOCS / "howto" / "child-workflows.md", DOCS / "howto" / "children_app.py"),
]


@pytest.mark.parametrize(("page", "example"), PAGES, ids=lambda p: p.name)
def test_the_page_shows_the_whole_example(page: Path, example: Path) -> None:
    blocks = [block.text for block in code_blocks(page.read_text(), "python")]
    assert blocks == [example.read_text()]


@pytest.mark.slow
@pytest.mark.parametrize(("page", "example"), PAGES, ids=lambda p: p.name)
def test_the_example_prints_what_the_page_shows(
    session: Session, page: Path, example: Path
) -> None:
    shutil.copy(example, session.cwd)
    steps = session_steps(page.read_text())
    assert all(isinstance(step, Command) for step in steps)
    session.play(steps)
