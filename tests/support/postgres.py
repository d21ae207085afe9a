"""PostgreSQL for the tests: a template database once per session, a clone per test.

Borrowed from procrastinate: the migrations run once, on a template database;
every test gets its own `CREATE DATABASE ... TEMPLATE` clone (a file copy, a
few milliseconds) and drops it afterwards. The server is the one `scripts/test`
starts; its URL comes from SHEPHERD_TEST_POSTGRES_URL.

PostgreSQL is never skipped: without the variable, or with the server down,
the fixtures fail and say how to start it.

tests/conftest.py registers the fixtures (importing them there, once, so that
the whole session shares one template); a test asks for `postgres_url` (a
fresh database's URL) or `make_postgres_url`
(a factory: `make_postgres_url()` clones another one, `make_postgres_url(empty=True)`
creates one without the schema, to test migrations).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

if TYPE_CHECKING:
    from shepherd.store.postgres import PostgresStore

__all__ = [
    "ENV",
    "ROUND_TRIP_TABLES",
    "MakePostgresUrl",
    "OpenStore",
    "apply_migrations",
    "database_url",
    "make_postgres_url",
    "postgres_server",
    "postgres_template",
    "postgres_url",
    "server_url",
    "without_autovacuum",
]

ENV = "SHEPHERD_TEST_POSTGRES_URL"
_HOW_TO_START = (
    "run the tests with `scripts/test` (it installs and starts PostgreSQL on "
    "127.0.0.1:55432 and exports the variable), or start that server once with "
    "`bash scripts/test --co -q` and export "
    f"{ENV}=postgresql://shepherd@127.0.0.1:55432/shepherd"
)

#: Makes a new database and returns its URL; `empty=True` skips the schema.
MakePostgresUrl = Callable[..., str]
#: Opens a PostgresStore (keyword arguments: clock, url) that the fixture closes.
OpenStore = Callable[..., Awaitable["PostgresStore"]]


def server_url() -> str:
    """The admin URL of the test server; fails the test when it is not set."""
    url = os.environ.get(ENV, "").strip()
    if not url:
        pytest.fail(
            f"{ENV} is not set: PostgreSQL tests never skip; {_HOW_TO_START}", pytrace=False
        )
    return url


def database_url(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname` instead."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def _admin(url: str) -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        pytest.fail(f"PostgreSQL at {ENV} is unreachable ({first}); {_HOW_TO_START}", pytrace=False)


def _create(url: str, dbname: str, template: str | None = None) -> None:
    with _admin(url) as conn:
        if template is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        else:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(dbname), sql.Identifier(template)
                )
            )


def _drop(url: str, dbname: str) -> None:
    with _admin(url) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )


def apply_migrations(url: str) -> None:
    """Open (and close) a PostgresStore on `url`: the store applies its migrations."""
    from shepherd.store.postgres import PostgresStore

    async def run() -> None:
        store = PostgresStore(url, min_connections=1, max_connections=1)
        await store.open()
        await store.close()

    # In a thread of its own: a test's event loop may already run in this one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The test server's admin URL, checked to answer."""
    url = server_url()
    with _admin(url) as conn:
        conn.execute("SELECT 1")
    return url


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """A template database with every migration applied, for this session."""
    name = f"shepherd_tpl_{os.getpid()}_{secrets.token_hex(3)}"
    _create(postgres_server, name)
    try:
        apply_migrations(database_url(postgres_server, name))
        yield name
    finally:
        _drop(postgres_server, name)


@pytest.fixture
def make_postgres_url(postgres_server: str, postgres_template: str) -> Iterator[MakePostgresUrl]:
    """A factory of fresh databases (clones of the template), all dropped after the test."""
    made: list[str] = []

    def make(*, empty: bool = False) -> str:
        name = f"shepherd_test_{secrets.token_hex(6)}"
        _create(postgres_server, name, None if empty else postgres_template)
        made.append(name)
        return database_url(postgres_server, name)

    try:
        yield make
    finally:
        for name in made:
            _drop(postgres_server, name)


@pytest.fixture
def postgres_url(make_postgres_url: MakePostgresUrl) -> str:
    """The URL of a fresh database with the schema, for this test alone."""
    return make_postgres_url()


#: The tables of a step's round trip.
ROUND_TRIP_TABLES = ("tasks", "steps", "requests", "replies", "events")


async def without_autovacuum(url: str) -> None:
    """Keep autovacuum off a step's tables: the test alone decides when they are analyzed.

    Its ANALYZE may come at any moment of a test (sooner on a server with many
    databases), and statistics taken mid-burst give the planner other plans than
    the one the test sets up.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for table in ROUND_TRIP_TABLES:
            await conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
