"""PostgreSQL for the tests: a template database once per session, ready databases per test.

The migrations run once, on a template database. A test's database comes from a
pool of ready ones (`DatabasePool`): a clone of the template (`CREATE DATABASE
... TEMPLATE`, a file copy of about 0.2-0.3 s) made the first time, then reused:
when the test ends, its database is cut off (every connection to it terminated),
renamed, emptied (`TRUNCATE ... RESTART IDENTITY`, planner statistics and table
counters cleared) and checked to have the template's schema and settings again,
in a background thread while the next test runs. A database that does not come
back like the template (a test changed its schema, its settings, the rows the
migrations wrote) is dropped instead and a fresh clone takes its place. The new
name on every hand-out keeps a process a test left behind from connecting into
the next test's database. The server is the one `scripts/test` starts; its URL
comes from SHEPHERD_TEST_POSTGRES_URL.

PostgreSQL is never skipped: without the variable, or with the server down,
the fixtures fail and say how to start it.

tests/conftest.py registers the fixtures (importing them there, once, so that
the whole session, or each pytest-xdist worker, shares one template and one
pool); a test asks for `postgres_url` (a fresh database's URL) or
`make_postgres_url` (a factory: `make_postgres_url()` hands out another one,
`make_postgres_url(empty=True)` creates one without the schema, to test
migrations).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
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
    "DatabasePool",
    "MakePostgresUrl",
    "OpenStore",
    "apply_migrations",
    "database_url",
    "make_postgres_url",
    "postgres_pool",
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


#: Every catalog fact a test could change in its database, one line each; a
#: database goes back to the pool only when these lines are the template's.
_SCHEMA_FACTS = r"""
WITH ns AS (
    SELECT oid, nspname FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
),
rel AS (
    SELECT c.* FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
)
SELECT fact FROM (
    SELECT 'namespace ' || nspname FROM ns
    UNION ALL
    SELECT format('relation %s %s %s %s %s', c.oid::regclass, c.relkind, c.relpersistence,
                  c.reloptions, c.relacl)
    FROM rel c
    UNION ALL
    SELECT format('column %s %s %s %s %s %s %s', c.oid::regclass, a.attname,
                  format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  pg_get_expr(d.adbin, d.adrelid), a.attoptions, a.attstattarget)
    FROM rel c
    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    UNION ALL
    SELECT format('constraint %s %s %s', co.conrelid::regclass, co.conname,
                  pg_get_constraintdef(co.oid))
    FROM pg_constraint co JOIN ns ON ns.oid = co.connamespace
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN rel c ON c.oid = i.indexrelid
    UNION ALL
    SELECT format('view %s %s', c.oid::regclass, pg_get_viewdef(c.oid))
    FROM rel c WHERE c.relkind IN ('v', 'm')
    UNION ALL
    SELECT format('sequence %s %s %s %s %s %s %s', s.seqrelid::regclass, s.seqstart,
                  s.seqincrement, s.seqmax, s.seqmin, s.seqcache, s.seqcycle)
    FROM pg_sequence s JOIN rel c ON c.oid = s.seqrelid
    UNION ALL
    SELECT format('function %s %s %s', p.oid::regprocedure, md5(p.prosrc), p.proconfig)
    FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
    UNION ALL
    SELECT format('type %s %s', t.oid::regtype, t.typtype)
    FROM pg_type t JOIN ns ON ns.oid = t.typnamespace
    UNION ALL
    SELECT format('enum %s %s %s', e.enumtypid::regtype, e.enumlabel, e.enumsortorder)
    FROM pg_enum e
    UNION ALL
    SELECT format('trigger %s %s %s %s', t.tgrelid::regclass, t.tgname, t.tgenabled,
                  pg_get_triggerdef(t.oid))
    FROM pg_trigger t WHERE NOT t.tgisinternal
    UNION ALL
    SELECT format('rule %s %s', r.ev_class::regclass, r.rulename)
    FROM pg_rewrite r JOIN rel c ON c.oid = r.ev_class WHERE c.relkind NOT IN ('v', 'm')
    UNION ALL
    SELECT format('policy %s %s', p.polrelid::regclass, p.polname) FROM pg_policy p
    UNION ALL
    SELECT format('statistics %s', s.stxname) FROM pg_statistic_ext s
    UNION ALL
    SELECT format('extension %s %s', extname, extversion) FROM pg_extension
    UNION ALL
    SELECT format('publication %s', pubname) FROM pg_publication
    UNION ALL
    SELECT format('event trigger %s', evtname) FROM pg_event_trigger
    UNION ALL
    SELECT format('database %s %s %s', datallowconn, datconnlimit, datistemplate)
    FROM pg_database WHERE datname = current_database()
    UNION ALL
    SELECT format('setting %s %s', s.setrole, s.setconfig)
    FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
    WHERE d.datname = current_database()
) facts(fact)
ORDER BY fact
"""

#: The user tables, schema-qualified and quoted (partitions come with their parent).
_TABLES = r"""
SELECT format('%I.%I', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
ORDER BY 1
"""

#: Every sequence and its state: last_value is NULL until the first nextval.
_SEQUENCES = r"""
SELECT format('%I.%I', schemaname, sequencename), start_value, last_value
FROM pg_sequences
WHERE schemaname NOT LIKE 'pg\_%' AND schemaname <> 'information_schema'
ORDER BY 1
"""


def _new_name() -> str:
    return f"shepherd_test_{secrets.token_hex(6)}"


@dataclass(frozen=True)
class _Template:
    """What a ready database must look like: the template's schema and kept rows."""

    #: Tables the migrations left empty: emptied between tests.
    emptied: tuple[str, ...]
    #: Tables the migrations wrote rows into (`schema_migrations`): left as they are.
    kept: tuple[str, ...]
    #: Every sequence: (name, start value, last value or None before the first nextval).
    sequences: tuple[tuple[str, int, int | None], ...]
    #: The `_SCHEMA_FACTS` lines, then each kept table's rows.
    facts: tuple[str, ...]


def _facts(conn: psycopg.Connection[tuple[object, ...]], kept: tuple[str, ...]) -> tuple[str, ...]:
    lines = [str(row[0]) for row in conn.execute(_SCHEMA_FACTS)]
    for table in kept:
        query = sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(
            sql.SQL(table)  # already quoted by format('%I.%I')
        )
        lines += [f"row {table} {row[0]}" for row in conn.execute(query)]
    return tuple(lines)


def _sequences(
    conn: psycopg.Connection[tuple[object, ...]],
) -> list[tuple[str, int, int | None]]:
    return [
        (str(name), int(str(start)), None if last is None else int(str(last)))
        for name, start, last in conn.execute(_SEQUENCES)
    ]


def _describe(url: str) -> _Template:
    with _admin(url) as conn:
        tables = [str(row[0]) for row in conn.execute(_TABLES)]
        kept: list[str] = []
        for table in tables:
            query = sql.SQL("SELECT EXISTS (SELECT FROM {})").format(sql.SQL(table))
            row = conn.execute(query).fetchone()
            if row is not None and row[0]:
                kept.append(table)
        sequences = tuple(_sequences(conn))
        return _Template(
            emptied=tuple(t for t in tables if t not in kept),
            kept=tuple(kept),
            sequences=sequences,
            facts=_facts(conn, tuple(kept)),
        )


class DatabasePool:
    """Databases with the template's schema, handed out one per test and reset afterwards.

    `acquire` returns a database name: a ready one, or one being reset (waiting
    for it), or else a new clone of the template; it keeps one more in hand for
    the next test (unless `spare=False`). `release` gives it back; the reset
    runs in a background thread (one at a time) while the next test runs.
    `close` waits for the resets and drops every database the pool made, given
    back or not.
    """

    def __init__(self, server: str, template: str, *, spare: bool = True) -> None:
        self._server = server
        self._spare = spare
        self._template = template
        self._shape = _describe(database_url(server, template))
        self._lock = threading.RLock()
        self._ready: list[str] = []
        #: Handed out and not given back yet.
        self._out: set[str] = set()
        self._pending: set[Future[str | None]] = set()
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pg-pool")
        #: Databases dropped because they did not come back like the template.
        self.discarded = 0

    def acquire(self) -> str:
        """The name of a ready database with the schema and no rows, for one test."""
        while True:
            with self._lock:
                if self._ready:
                    name = self._ready.pop()
                    break
                pending = set(self._pending)
            if not pending:
                name = _new_name()
                _create(self._server, name, self._template)
                break
            wait(pending, return_when=FIRST_COMPLETED)
        with self._lock:
            self._out.add(name)
            # One database in hand for the next test: this test's reset then
            # runs while the next test does, rather than before it.
            if self._spare and not self._ready and not self._pending:
                self._submit(self._clone)
        return name

    def release(self, name: str) -> None:
        """Give `name` back: it is reset (or dropped) in the background."""
        with self._lock:
            self._out.discard(name)
            self._submit(self._reset, name)

    def _submit(self, job: Callable[..., str | None], *args: str) -> None:
        """Run `job` in the background; the database name it returns becomes ready."""
        future = self._background.submit(job, *args)
        self._pending.add(future)
        future.add_done_callback(self._done)

    def _clone(self) -> str | None:
        name = _new_name()
        try:
            with psycopg.connect(self._server, autocommit=True, connect_timeout=5) as admin:
                admin.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(self._template)
                    )
                )
        except psycopg.Error as exc:  # acquire clones in the foreground then
            print(f"\npostgres pool: could not clone the template: {exc}", file=sys.stderr)
            return None
        return name

    def drop_later(self, name: str) -> None:
        """Drop `name` in the background (a database made outside the pool)."""
        self._background.submit(self._drop_quietly, name)

    def close(self) -> None:
        """Wait for every reset, then drop the ready databases and any not given back."""
        self._background.shutdown(wait=True)
        with self._lock:
            left = [*self._ready, *sorted(self._out)]
            self._ready, self._out = [], set()
        for name in left:
            self._drop_quietly(name)

    def _done(self, future: Future[str | None]) -> None:
        with self._lock:
            self._pending.discard(future)
            name = None if future.cancelled() or future.exception() else future.result()
            if name is not None:
                self._ready.append(name)

    def _drop_quietly(self, name: str) -> None:
        try:
            with psycopg.connect(self._server, autocommit=True, connect_timeout=5) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        except psycopg.Error as exc:  # a leftover database, not a failed test
            print(f"\npostgres pool: could not drop {name}: {exc}", file=sys.stderr)

    def _reset(self, name: str) -> str | None:
        """Cut `name` off, rename it, empty it: its new name (or a new clone's, once dropped)."""
        fresh = _new_name()
        try:
            with psycopg.connect(self._server, autocommit=True, connect_timeout=5) as admin:
                # Wait (up to 5 s each) for every backend on it to exit: session
                # state (advisory locks, LISTEN, prepared statements) goes with it.
                admin.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    (name,),
                )
                prepared = admin.execute(
                    "SELECT count(*) FROM pg_prepared_xacts WHERE database = %s", (name,)
                ).fetchone()
                if prepared is not None and prepared[0]:
                    raise RuntimeError("a prepared transaction is left in it")
                admin.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(name), sql.Identifier(fresh)
                    )
                )
            self._empty(database_url(self._server, fresh))
        except Exception:  # whatever went wrong, the next test gets a fresh clone
            self._drop_quietly(name)
            self._drop_quietly(fresh)
            self.discarded += 1
            return self._clone()
        return fresh

    def _empty(self, url: str) -> None:
        shape = self._shape
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            if _facts(conn, shape.kept) != shape.facts:
                raise RuntimeError("it does not look like the template any more")
            # Only the tables the test wrote to: a TRUNCATE costs a new file per
            # table and index, most tests touch a few of the tables.
            written = (
                [
                    str(row[0])
                    for row in conn.execute(
                        sql.SQL(" UNION ALL ").join(
                            sql.SQL("SELECT {} WHERE EXISTS (SELECT FROM {})").format(
                                sql.Literal(table), sql.SQL(table)
                            )
                            for table in shape.emptied
                        )
                    )
                ]
                if shape.emptied
                else []
            )
            with conn.transaction():
                if written:
                    conn.execute(
                        sql.SQL("TRUNCATE {}").format(
                            sql.SQL(", ").join(sql.SQL(table) for table in written)
                        )
                    )
                # Every sequence as in the template (setval is not transactional).
                for sequence in set(_sequences(conn)) - set(shape.sequences):
                    name, start, _ = sequence
                    was = next(last for seq, _, last in shape.sequences if seq == name)
                    conn.execute(
                        "SELECT setval(%s::regclass, %s, %s)",
                        (name, start if was is None else was, was is not None),
                    )
                # A fresh clone has no planner statistics and no table counters
                # (autovacuum decides from them): neither has an emptied database.
                conn.execute(
                    "DELETE FROM pg_statistic WHERE starelid IN ("
                    "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema')"
                )
                conn.execute(
                    "SELECT count(pg_stat_reset_single_table_counters(c.oid)) "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
                )


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The test server's admin URL, checked to answer."""
    url = server_url()
    with _admin(url) as conn:
        conn.execute("SELECT 1")
    return url


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """A template database with every migration applied, for this session (or xdist worker)."""
    name = f"shepherd_tpl_{os.getpid()}_{secrets.token_hex(3)}"
    _create(postgres_server, name)
    try:
        apply_migrations(database_url(postgres_server, name))
        yield name
    finally:
        _drop(postgres_server, name)


@pytest.fixture(scope="session")
def postgres_pool(postgres_server: str, postgres_template: str) -> Iterator[DatabasePool]:
    """The session's ready databases (clones of `postgres_template`)."""
    pool = DatabasePool(postgres_server, postgres_template)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def make_postgres_url(
    postgres_server: str, postgres_pool: DatabasePool
) -> Iterator[MakePostgresUrl]:
    """A factory of fresh databases (from the pool, or empty ones), given back after the test."""
    handed: list[str] = []
    empty_ones: list[str] = []

    def make(*, empty: bool = False) -> str:
        if empty:
            name = _new_name()
            _create(postgres_server, name)
            empty_ones.append(name)
        else:
            name = postgres_pool.acquire()
            handed.append(name)
        return database_url(postgres_server, name)

    try:
        yield make
    finally:
        for name in handed:
            postgres_pool.release(name)
        for name in empty_ones:
            postgres_pool.drop_later(name)


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
