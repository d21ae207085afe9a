"""Fixtures shared by every test: a clean environment and a fake clock."""

from __future__ import annotations

import os

import pytest

from shepherd.testing import FakeClock

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
