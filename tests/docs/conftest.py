"""Fixtures of the runnable-docs tests: a console session in a fresh directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from doctools import Session

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A console session in an empty directory; its workers are killed at the end."""
    playing = Session(cwd=tmp_path)
    try:
        yield playing
    finally:
        playing.close()
