"""docs/concepts.md: the line a process logs when its heartbeats fail is the one the page shows."""

from __future__ import annotations

import logging

import pytest
from doctools import DOCS, code_blocks

from shepherd.registry import Standing
from shepherd.testing import FakeClock

PAGE = DOCS / "concepts.md"


def test_the_pause_line_is_the_one_a_process_logs(caplog: pytest.LogCaptureFixture) -> None:
    (shown,) = [
        block.text.strip()
        for block in code_blocks(PAGE.read_text(), "text")
        if "shepherd.registry" in block.text
    ]
    caplog.set_level(logging.WARNING, logger="shepherd.registry")
    clock = FakeClock()
    standing = Standing(ttl=10.0, clock=clock)
    clock.advance(10.0)
    standing.beat_failed()

    (record,) = caplog.records
    assert shown == f"{record.levelname} {record.name}: {record.getMessage()}"
