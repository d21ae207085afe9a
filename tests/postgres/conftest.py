"""PostgreSQL fixtures for the backend's own tests: a fresh database per test, stores on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from shepherd.clock import Clock
from shepherd.store.postgres import PostgresStore
from shepherd.testing import FakeClock
from support.postgres import OpenStore

# postgres_url / make_postgres_url (a fresh database per test) come from tests/conftest.py.
__all__ = ["open_store", "store"]


@pytest.fixture
async def open_store(postgres_url: str) -> AsyncIterator[OpenStore]:
    """Opens PostgresStores on this test's database (closed after the test)."""
    opened: list[PostgresStore] = []

    async def make(*, clock: Clock | None = None, url: str | None = None) -> PostgresStore:
        store = PostgresStore(url or postgres_url, clock=clock)
        await store.open()
        opened.append(store)
        return store

    yield make
    for store in reversed(opened):
        await store.close()


@pytest.fixture
async def store(open_store: OpenStore, fake_clock: FakeClock) -> PostgresStore:
    """A store on a fresh database, on the test's FakeClock (it replaces the database's)."""
    return await open_store(clock=fake_clock)
