"""An App over a real store, SQLite and PostgreSQL, with short windows so that failures show quickly.

Every test using `app` runs once per backend: a file of its own for SQLite, a
ready database with the schema and no rows for PostgreSQL (support.postgres;
PostgreSQL never skips: with the server down those tests fail and say how to
start it).

A test marked `fake_time` gets its `app` on the test's `fake_clock`: the store
reads its time from it and every role waits on it, so windows, retries,
backoffs and scans pass when the test moves the clock (support.fake_time),
not in real time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from shepherd import Alert, App
from support.fake_time import PERIODS

#: The app's periods on real time: short, so that failures show quickly.
REAL_TIME: dict[str, Any] = {"supervisor_interval": 0.1, "poll_interval": 0.05, "lease_ttl": 1.0}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fake_time: the `app` fixture runs on the test's `fake_clock`"
    )


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
async def app(
    request: pytest.FixtureRequest, store_url: str, alerts: list[Alert]
) -> AsyncIterator[App]:
    """A fresh app on its own store; tests register workflows and agents, then run it."""
    fake_time = request.node.get_closest_marker("fake_time") is not None
    app = App(
        store_url,
        alerts=[alerts.append],
        clock=request.getfixturevalue("fake_clock") if fake_time else None,
        sqlite_synchronous="NORMAL",
        **(PERIODS if fake_time else REAL_TIME),
    )
    try:
        yield app
    finally:
        await app.close()
