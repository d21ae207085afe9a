"""Which backends a test runs on.

The `store_url` (integration) and `shared_store` (e2e) fixtures run a test once
per backend, SQLite and PostgreSQL: a test that exercises the store, whose
outcome could differ from one backend to the other. A test of pure logic or
rendering, which would pass the same with any store (input refused before the
store is touched, a page's escaping, an HTTP responder's parsing), runs once,
on SQLite: mark it `sqlite_only()` (or `sqlite_only("shared_store")`).
"""

from __future__ import annotations

import pytest


def sqlite_only(fixture: str = "store_url") -> pytest.MarkDecorator:
    """Run the test once, with `fixture` (a backend-parametrised fixture) on SQLite."""
    return pytest.mark.parametrize(fixture, ["sqlite"], indirect=True)


def postgres_only(fixture: str = "backend") -> pytest.MarkDecorator:
    """Run the test once, with `fixture` on PostgreSQL: for what only PostgreSQL has
    (its locks, its sessions), where SQLite has nothing to check."""
    return pytest.mark.parametrize(fixture, ["postgres"], indirect=True)
