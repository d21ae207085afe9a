"""An App over a real store, SQLite and PostgreSQL, with short windows so that failures show quickly.

Every test using `app` runs once per backend: a file of its own for SQLite, a
ready database with the schema and no rows for PostgreSQL (support.postgres;
PostgreSQL never skips: with the server down those tests fail and say how to
start it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shepherd import Alert, App


@pytest.fixture
def alerts() -> list[Alert]:
    """Every alert the app raises, in order."""
    return []


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of the backend under test."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return f"sqlite:///{tmp_path}/s.db"


@pytest.fixture
async def app(store_url: str, alerts: list[Alert]) -> AsyncIterator[App]:
    """A fresh app on its own store; tests register workflows and agents, then run it."""
    app = App(
        store_url,
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
