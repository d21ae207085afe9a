"""The agent-pools how-to: its app is the file the session runs, and every command prints what it shows.

The page starts its workers in the background (`&`, as in a shell): a
worker line ending with `&` keeps the workers started before it running.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

if TYPE_CHECKING:
    from pathlib import Path

PAGE = DOCS / "howto" / "agent-pools.md"
EXAMPLE = DOCS / "howto" / "agent_pools.py"


class BackgroundSession(Session):
    """A session in which `shepherd worker ... &` runs beside the workers already started."""

    def start_worker(self, words: list[str], extra: dict[str, str]) -> str:
        if words[-1:] == ["&"]:
            words = words[:-1]
            self.worker = None  # not stopped: it runs on beside the next one, until close()
        return super().start_worker(words, extra)


def test_the_page_shows_the_whole_example() -> None:
    blocks = [block.text for block in code_blocks(PAGE.read_text(), "python")]
    assert blocks == [EXAMPLE.read_text()]


@pytest.mark.slow
def test_the_pools_run_what_the_page_shows(tmp_path: Path) -> None:
    steps = session_steps(PAGE.read_text())
    commands = [step.line for step in steps if isinstance(step, Command)]
    assert [line.split()[-1] for line in commands[:3]] == ["&"] * 3
    assert len(commands) == 4
    session = BackgroundSession(cwd=tmp_path)
    try:
        shutil.copy(EXAMPLE, session.cwd)
        session.play(steps)
        assert len(session.workers) == 3
        assert all(worker.process.poll() is None for worker in session.workers)
    finally:
        session.close()
