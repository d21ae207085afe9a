"""An App over a real SQLite file, with short windows so that failures show quickly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shepherd import Alert, App


@pytest.fixture
def alerts() -> list[Alert]:
    """Every alert the app raises, in order."""
    return []


@pytest.fixture
async def app(tmp_path: Path, alerts: list[Alert]) -> AsyncIterator[App]:
    """A fresh app on its own SQLite file; tests register workflows and agents, then run it."""
    app = App(
        f"sqlite:///{tmp_path}/s.db",
        alerts=[alerts.append],
        supervisor_interval=0.1,
        poll_interval=0.05,
        lease_ttl=1.0,
        sqlite_synchronous="NORMAL",
    )
    try:
        yield app
    finally:
        await app.close()
