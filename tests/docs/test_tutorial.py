"""The tutorial runs as written: its code is the files under docs/tutorial, its sessions are real."""

from __future__ import annotations

import shutil

import pytest
from doctools import DOCS, Session, code_blocks, session_steps

TUTORIAL = DOCS / "tutorial.md"
FILES = sorted((DOCS / "tutorial").glob("*.py"))


def test_every_python_block_is_one_of_its_files() -> None:
    blocks = code_blocks(TUTORIAL.read_text(), "python")
    texts = {path.name: path.read_text() for path in FILES}
    for block in blocks:
        assert block.text in texts.values(), (
            f"tutorial.md line {block.line}: this python block is none of "
            f"{sorted(texts)}; copy the file into the page, verbatim"
        )
    shown = {block.text for block in blocks}
    assert [name for name, text in texts.items() if text not in shown] == []


@pytest.mark.slow
def test_console_sessions_print_what_the_page_shows(session: Session) -> None:
    for path in FILES:
        shutil.copy(path, session.cwd)
    steps = session_steps(TUTORIAL.read_text())
    assert any(getattr(step, "line", "").startswith("shepherd run") for step in steps)
    session.play(steps)
    assert session.worker is not None
    assert session.worker.interrupt() == 0, session.worker.stderr()
