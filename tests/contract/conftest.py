"""The conformance suite's backends: every test here runs once per backend.

To add a backend, add to `BACKENDS` a function that returns its `Backend` (how
to make a fresh database, how to connect a store to it, how to read which
migrations it recorded); the `store` fixture and the stateful test pick it up.
The function gets the pytest request, so a backend needing session set-up takes
it there: PostgreSQL asks for `make_postgres_url` (tests/conftest.py) with
`request.getfixturevalue(...)`, whose `create` hands out a ready database with
the schema (support.postgres: the session's pool of template clones, emptied
between tests). PostgreSQL is never skipped: with the server down its
tests fail and say how to start it.

The suite moves time with a `FakeClock`: a backend must take "now" from the
clock it is given (its constructor's `clock=`) for the time-dependent
guarantees (expiry, `not_before`, leases) to be testable without sleeping.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.store.postgres import PostgresStore
from shepherd.store.sqlite import SQLiteStore, path_from_url
from support.factories import Backend, Stores

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.postgres import MakePostgresUrl


async def _sqlite_create(workdir: Path) -> str:
    return f"sqlite:///{workdir}/{uuid.uuid4().hex}.db"


def _sqlite_connect(url: str, clock: Clock) -> Store:
    # NORMAL: the suite checks semantics, not durability against power loss.
    return SQLiteStore(url, clock=clock, synchronous="NORMAL")


async def _sqlite_migrations(url: str) -> list[int]:
    with closing(sqlite3.connect(path_from_url(url))) as conn:
        return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]


def _sqlite(request: pytest.FixtureRequest) -> Backend:
    return Backend(
        name="sqlite",
        create=_sqlite_create,
        connect=_sqlite_connect,
        applied_migrations=_sqlite_migrations,
    )


def _postgres_connect(url: str, clock: Clock) -> Store:
    # Small pools: a test opens several stores on its database.
    return PostgresStore(url, clock=clock, min_connections=1, max_connections=4)


async def _postgres_migrations(url: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute("SELECT version FROM schema_migrations ORDER BY 1")
        return [row[0] for row in await cursor.fetchall()]


def _postgres(request: pytest.FixtureRequest) -> Backend:
    make_url: MakePostgresUrl = request.getfixturevalue("make_postgres_url")

    async def create(workdir: Path) -> str:
        # From the session's pool: the template's schema, no data.
        return make_url()

    return Backend(
        name="postgres",
        create=create,
        connect=_postgres_connect,
        applied_migrations=_postgres_migrations,
    )


#: Backend name -> its Backend, given the test's request (for session fixtures).
BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Backend]] = {
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test."""
    return BACKENDS[request.param](request)


@pytest.fixture
async def stores(backend: Backend, tmp_path: Path, fake_clock: FakeClock) -> AsyncIterator[Stores]:
    """Connections to a fresh database of the backend under test, on `fake_clock`."""
    opened = Stores(backend.connect, await backend.create(tmp_path), fake_clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def store(stores: Stores) -> Store:
    """An opened store on a fresh database, whose time is `fake_clock`."""
    return await stores.connect()
