"""Fixtures shared by every test: a clean environment, a fake clock, PostgreSQL databases.

The PostgreSQL fixtures (`postgres_url`, `make_postgres_url`, and the session's
template behind them) are registered here, once, so that every directory using
them (the backend's own tests, the conformance suite, the integration tests)
shares one template database per session.
"""

from __future__ import annotations

import os

import pytest

from shepherd.testing import FakeClock
from support.postgres import (  # fixtures, registered by importing them
    make_postgres_url,
    postgres_pool,
    postgres_server,
    postgres_template,
    postgres_url,
)

__all__ = [
    "fake_clock",
    "make_postgres_url",
    "postgres_pool",
    "postgres_server",
    "postgres_template",
    "postgres_url",
]

#: The one SHEPHERD_* variable tests may see: set by scripts/test.
_KEEP = {"SHEPHERD_TEST_POSTGRES_URL"}


@pytest.fixture(autouse=True)
def _scrub_shepherd_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's SHEPHERD_* settings must not change what tests see."""
    for name in list(os.environ):
        if name.startswith("SHEPHERD_") and name not in _KEEP:
            monkeypatch.delenv(name)


@pytest.fixture
def fake_clock() -> FakeClock:
    """A clock that moves only when the test says so."""
    return FakeClock()
