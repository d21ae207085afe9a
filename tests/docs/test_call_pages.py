"""The how-tos of calls and exclusive owners: each example is the file the session runs,
and it prints what its page shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from doctools import DOCS, Command, Session, code_blocks, session_steps

#: (page, the examples it shows and runs, in page order)
PAGES = [
    (
        DOCS / "howto" / "calls.md",
        [DOCS / "howto" / "call_app.py", DOCS / "howto" / "governed_call_app.py"],
    ),
    (
        DOCS / "howto" / "exclusive-owners.md",
        [
            DOCS / "howto" / "owners_app.py",
            DOCS / "howto" / "owner_life_app.py",
            DOCS / "howto" / "reminder_app.py",
        ],
    ),
]
#: The test ids: the pages' names.
IDS = [page.stem for page, _ in PAGES]


@pytest.mark.parametrize(("page", "examples"), PAGES, ids=IDS)
def test_the_page_shows_the_whole_examples(page: Path, examples: list[Path]) -> None:
    blocks = [block.text for block in code_blocks(page.read_text(), "python")]
    assert blocks == [example.read_text() for example in examples]


@pytest.mark.slow
@pytest.mark.parametrize(("page", "examples"), PAGES, ids=IDS)
def test_the_examples_print_what_the_page_shows(
    session: Session, page: Path, examples: list[Path]
) -> None:
    for example in examples:
        shutil.copy(example, session.cwd)
    steps = session_steps(page.read_text())
    assert all(isinstance(step, Command) for step in steps)
    assert len(steps) == len(examples)
    session.play(steps)
