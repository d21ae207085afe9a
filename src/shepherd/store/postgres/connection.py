"""Connecting to PostgreSQL: connection strings, one-line failure reasons, migrations.

Every connection gets a short connect timeout and TCP keepalives, so a dead
server or a dead network path is noticed in seconds, not at the kernel's
two-hour default. Messages name the server but never the password.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

from shepherd.errors import StoreUnavailableError
from shepherd.store.migrations import VERSION_COLUMNS, Found, migrations, pending
from shepherd.store.postgres import arrays

__all__ = [
    "MIGRATION_LOCK",
    "SESSION_SETTINGS",
    "Connection",
    "build_conninfo",
    "configure",
    "connect",
    "describe",
    "inspect",
    "migrate",
    "reason",
    "redact",
]

# `scheme://user:password@` in a URL.
_USERINFO_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")

#: A connection returning rows as tuples.
Connection = psycopg.AsyncConnection[TupleRow]

#: The advisory lock held while migrations run ("shepherd" in ASCII): processes
#: starting together apply each migration once.
MIGRATION_LOCK = 0x7368657068657264


#: Server-side limits set on every connection (through libpq's `options`), so that
#: nothing a process holds outlives it by more than a few seconds when its host
#: dies or is cut off without a reset reaching the server: a session idle inside
#: a transaction is ended (and its locks released) after 5 s; a peer that stops
#: answering is detected by keepalives after about 11 s of silence, and by the
#: TCP user timeout after 10 s of unacknowledged data. Writes wait at most
#: `LOCK_TIMEOUT_MS` for a row another session holds.
SESSION_SETTINGS: dict[str, int] = {
    "idle_in_transaction_session_timeout": 5000,
    "tcp_keepalives_idle": 5,
    "tcp_keepalives_interval": 2,
    "tcp_keepalives_count": 3,
    "tcp_user_timeout": 10000,
    "lock_timeout": 2000,
}


#: Added to the writer's session: its statements all find their rows through an
#: index (an id, a key, a queue's visibility), and a plan cached while a table
#: was nearly empty would otherwise read the whole table for as long as the
#: connection lives (see docs/design.md, "The writer never reads a table
#: whole"). A statement with no index to use still scans, at a cost so high
#: that a server built with JIT would compile it every time: no JIT here (the
#: writer's statements touch a few rows each).
WRITER_SETTINGS: dict[str, str] = {"enable_seqscan": "off", "jit": "off"}


def build_conninfo(
    url: str,
    *,
    connect_timeout: float,
    application_name: str,
    settings: Mapping[str, str | int] | None = None,
) -> str:
    """`url` with a connect timeout, TCP keepalives, session limits and a name added.

    `settings` are set on the session after `SESSION_SETTINGS`. Settings already
    in the URL win over these defaults (an `options` given in the URL is kept
    after ours, so its `-c` settings override them).

    Raises:
        StoreUnavailableError: The URL cannot be parsed.
    """
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StoreUnavailableError(
            f"invalid PostgreSQL URL {redact(url)!r}: {reason(exc, url)}"
        ) from None
    defaults: dict[str, str | int] = {
        # libpq counts whole seconds and treats anything below 2 as 2.
        "connect_timeout": max(2, round(connect_timeout)),
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 10000,
        "application_name": application_name,
    }
    extra: dict[str, str | int] = {k: v for k, v in defaults.items() if k not in given}
    session = {**SESSION_SETTINGS, **(settings or {})}
    ours = " ".join(f"-c {name}={value}" for name, value in session.items())
    theirs = given.get("options")
    extra["options"] = f"{ours} {theirs}" if theirs else ours
    return make_conninfo(url, **extra)


def redact(url: str) -> str:
    """`url` without its password (for messages), even when it does not parse."""
    return _without_password(url, url)


def describe(url: str) -> str:
    """`postgresql://user@host:port/dbname` of `url`, without the password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return redact(url)
    user = params.get("user")
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or user or ""
    who = f"{user}@" if user else ""
    return f"postgresql://{who}{host}:{port}/{dbname}"


def reason(exc: BaseException, url: str) -> str:
    """The first meaningful line of a driver error, with any password removed."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = text.removeprefix("connection failed: ").replace(url, redact(url))
    return _without_password(text, url)


def _without_password(text: str, url: str) -> str:
    """`text` with the password of `url` (in a URL's userinfo, or anywhere) replaced by `***`."""
    text = _USERINFO_PASSWORD.sub(r"\1***@", text)
    try:
        password = conninfo_to_dict(url).get("password")
    except psycopg.ProgrammingError:
        password = None
    if password and isinstance(password, str):
        text = text.replace(password, "***")
    return text


async def connect(
    conninfo: str, url: str, *, autocommit: bool = True, timeout_note: str | None = None
) -> Connection:
    """One connection to the server.

    Args:
        conninfo: The connection string (its `connect_timeout` bounds the wait).
        url: The store URL, for messages.
        autocommit: The connection's autocommit mode.
        timeout_note: The setting that connect timeout comes from, as a message
            names it (`store_timeout (5 s)`), when the server did not answer in time.

    Raises:
        StoreUnavailableError: The server cannot be reached or refuses us; the
            message is one line naming the server, without the password.
    """
    try:
        conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=autocommit)
    except psycopg.Error as exc:
        why = reason(exc, url)
        within = f" within {timeout_note}" if timeout_note and "timeout" in why else ""
        raise StoreUnavailableError(
            f"cannot reach PostgreSQL store {describe(url)}{within}: {why}"
        ) from None
    arrays.register(conn)
    return conn


async def configure(conn: Connection) -> None:
    """Set up a connection of the read pool as `connect` sets up its own."""
    arrays.register(conn)


async def migrate(conn: Connection) -> list[int]:
    """Apply pending migrations in one transaction; return the versions applied.

    Each file goes to the server whole, as one batch of statements (PostgreSQL
    parses it itself).

    The transaction holds `pg_advisory_xact_lock(MIGRATION_LOCK)`, so several
    processes opening the store at once wait for each other and each migration
    runs exactly once.
    """
    applied: list[int] = []
    async with conn.transaction():
        # Waiting for another process's migrations is expected: no lock timeout here.
        await conn.execute("SET LOCAL lock_timeout = 0")
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
            "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cursor = await conn.execute("SELECT version FROM schema_migrations")
        done = {version for (version,) in await cursor.fetchall()}
        for version, name, sql in pending(migrations("postgres"), done):
            # Without parameters psycopg sends the file as one simple query.
            await conn.execute(sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
            applied.append(version)
    return applied


#: The tables of the schemas on the search path (where the store's tables are made).
_TABLES = (
    "SELECT c.relname FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p') AND n.nspname = ANY (current_schemas(false)) "
    "ORDER BY c.relname"
)
#: The columns of the `schema_migrations` table the search path finds.
_VERSION_COLUMNS = (
    "SELECT attname FROM pg_catalog.pg_attribute "
    "WHERE attrelid = to_regclass('schema_migrations') AND attnum > 0 AND NOT attisdropped"
)


async def inspect(conn: Connection) -> Found:
    """What the database holds, read in a transaction that writes nothing.

    `conn` has autocommit off and no transaction open; it is left so.
    """
    async with conn.transaction():
        tables = tuple(str(name) for (name,) in await (await conn.execute(_TABLES)).fetchall())
        if "schema_migrations" not in tables:
            return Found(tables, None)
        cursor = await conn.execute(_VERSION_COLUMNS)
        columns = {str(name) for (name,) in await cursor.fetchall()}
        if not columns >= VERSION_COLUMNS:
            return Found(tables, None)
        cursor = await conn.execute("SELECT version, name FROM schema_migrations")
        applied: dict[int, str] = {}
        for version, name in await cursor.fetchall():
            if not isinstance(version, int) or not isinstance(name, str):
                return Found(tables, None)
            applied[version] = name
        return Found(tables, applied)
