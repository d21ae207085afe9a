"""`shepherd.store.sqlite.errors`: real `sqlite3` errors, each classified as a ShepherdError.

Every error here is raised by SQLite itself on a small file in `tmp_path` (a
full page budget, a damaged header, a lock held by another connection...), so
the classifier is checked against what SQLite really says, codes included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from shepherd.errors import (
    PayloadError,
    ShepherdError,
    StoreDamagedError,
    StoreFullError,
    StoreUnavailableError,
)
from shepherd.store.sqlite.errors import classify, is_store_wide, translate


def _raised(action: Callable[[], object]) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as caught:
        action()
    return caught.value


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode to a new file with one table `t(x)`."""
    with closing(sqlite3.connect(tmp_path / "s.db", isolation_level=None)) as conn:
        conn.execute("CREATE TABLE t (x)")
        yield conn


def test_a_full_disk_is_store_full(db: sqlite3.Connection) -> None:
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")
    exc = _raised(lambda: db.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,)))
    error = classify(exc, "sqlite:////data/s.db")
    assert type(error) is StoreFullError
    assert isinstance(error, StoreUnavailableError)  # passing: roles wait it out
    assert error.message == (
        "the store's disk is full: /data/s.db (free space, then the roles resume by themselves)"
    )
    assert is_store_wide(exc)


def test_the_message_alone_is_enough_without_a_code() -> None:
    error = classify(sqlite3.OperationalError("database or disk is full"), "sqlite:///s.db")
    assert type(error) is StoreFullError
    assert "s.db" in error.message


@pytest.mark.parametrize("damaged", ["header", "whole file"])
def test_a_file_that_is_not_a_database_is_damaged(tmp_path: Path, damaged: str) -> None:
    path = tmp_path / "d.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    size = 100 if damaged == "header" else path.stat().st_size
    path.write_bytes(b"\xff" * size + path.read_bytes()[size:])
    with closing(sqlite3.connect(path)) as conn:
        exc = _raised(lambda: conn.execute("SELECT * FROM t"))
    error = classify(exc, f"sqlite:///{path}")
    assert type(error) is StoreDamagedError
    assert not isinstance(error, StoreUnavailableError)  # not passing: workers stop
    assert error.message == (
        f"the store file {path} is damaged (file is not a database): "
        "run `PRAGMA integrity_check`, restore from a backup"
    )
    assert is_store_wide(exc)


def test_text_that_is_not_utf8_is_damage(db: sqlite3.Connection) -> None:
    db.execute("INSERT INTO t VALUES (CAST(x'ff80' AS TEXT))")
    exc = _raised(lambda: db.execute("SELECT x FROM t").fetchall())
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is StoreDamagedError
    assert "Could not decode to UTF-8" in error.message


def test_a_lock_held_past_the_busy_timeout_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with (
        closing(sqlite3.connect(path, isolation_level=None)) as holder,
        closing(sqlite3.connect(path, isolation_level=None, timeout=0)) as other,
    ):
        holder.execute("BEGIN EXCLUSIVE")
        exc = _raised(lambda: other.execute("BEGIN IMMEDIATE"))
        holder.execute("ROLLBACK")
    error = classify(exc, f"sqlite:///{path}")
    assert type(error) is StoreUnavailableError
    assert error.message == (
        f"the SQLite store {path} is busy: another connection held its lock "
        "past store_timeout, the busy timeout (database is locked)"
    )
    assert is_store_wide(exc)


@pytest.mark.parametrize("case", ["read-only", "cannot open"])
def test_files_that_cannot_be_written_or_opened_are_unavailable(tmp_path: Path, case: str) -> None:
    path = tmp_path / "r.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
    if case == "read-only":
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            exc = _raised(lambda: conn.execute("INSERT INTO t VALUES (1)"))
        expected = "attempt to write a readonly database"
    else:
        exc = _raised(lambda: sqlite3.connect(tmp_path))  # a directory
        expected = "unable to open database file"
    error = classify(exc, f"sqlite:///{path}")
    assert type(error) is StoreUnavailableError
    assert error.message == f"the SQLite store {path} is unavailable: {expected}"
    assert is_store_wide(exc)


def test_a_statement_sqlite_refuses_is_refused_not_unavailable(
    db: sqlite3.Connection,
) -> None:
    exc = _raised(lambda: db.execute("SELECT x FROM t WHERE nope(x)"))
    assert exc.sqlite_errorcode == sqlite3.SQLITE_ERROR
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is ShepherdError  # retrying would meet it again
    assert error.message == "the SQLite store s.db refused a statement: no such function: nope"
    assert not is_store_wide(exc)  # this one statement's: a batch is split


def test_a_table_that_exists_already_is_refused_not_unavailable(
    db: sqlite3.Connection,
) -> None:
    exc = _raised(lambda: db.execute("CREATE TABLE t (y)"))
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is ShepherdError
    assert "table t already exists" in error.message


def test_a_value_over_sqlites_length_limit_is_a_payload_error(db: sqlite3.Connection) -> None:
    db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 100)
    exc = _raised(lambda: db.execute("INSERT INTO t VALUES (?)", ("𝄞" * 100,)))
    assert exc.sqlite_errorcode == sqlite3.SQLITE_TOOBIG
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is PayloadError
    assert error.message == (
        "the SQLite store s.db refused a value too large to keep (string or blob too big); "
        "nothing was written"
    )
    assert not is_store_wide(exc)
    assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (sqlite3.SQLITE_FULL, StoreFullError),
        (sqlite3.SQLITE_CORRUPT, StoreDamagedError),
        (sqlite3.SQLITE_NOTADB, StoreDamagedError),
        (sqlite3.SQLITE_BUSY, StoreUnavailableError),
        (sqlite3.SQLITE_LOCKED, StoreUnavailableError),
        (sqlite3.SQLITE_IOERR, StoreUnavailableError),
        (sqlite3.SQLITE_IOERR_SHORT_READ, StoreUnavailableError),  # an extended code
        (sqlite3.SQLITE_CANTOPEN, StoreUnavailableError),
        (sqlite3.SQLITE_INTERRUPT, StoreUnavailableError),
        (sqlite3.SQLITE_TOOBIG, PayloadError),
        (sqlite3.SQLITE_CONSTRAINT, ShepherdError),
        (sqlite3.SQLITE_MISMATCH, ShepherdError),
        (sqlite3.SQLITE_RANGE, ShepherdError),
        (sqlite3.SQLITE_ERROR, ShepherdError),
    ],
)
def test_each_result_code_has_one_kind(code: int, kind: type[ShepherdError]) -> None:
    exc = sqlite3.OperationalError("a message that names no condition")
    exc.sqlite_errorcode = code
    assert type(classify(exc, "sqlite:///s.db")) is kind


def test_an_operational_error_without_a_code_is_unavailable_but_not_store_wide() -> None:
    exc = sqlite3.OperationalError("something without a code")
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is StoreUnavailableError
    assert not is_store_wide(exc)  # maybe this one statement's: a batch is split


def test_a_constraint_is_a_refused_statement(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE u (k PRIMARY KEY)")
    db.execute("INSERT INTO u VALUES (1)")
    exc = _raised(lambda: db.execute("INSERT INTO u VALUES (1)"))
    assert isinstance(exc, sqlite3.IntegrityError)
    error = classify(exc, "sqlite:///s.db")
    assert type(error) is ShepherdError
    assert error.message == (
        "the SQLite store s.db refused a statement: UNIQUE constraint failed: u.k"
    )
    assert not is_store_wide(exc)


def test_translate_keeps_the_cause_and_leaves_other_errors_alone() -> None:
    cause = sqlite3.OperationalError("database or disk is full")
    error = translate(cause, "sqlite:///s.db")
    assert isinstance(error, StoreFullError)
    assert error.__cause__ is cause
    other = ValueError("not ours to translate")
    assert translate(other, "sqlite:///s.db") is other


def test_store_errors_already_classified_count_as_store_wide() -> None:
    assert is_store_wide(StoreFullError())
    assert is_store_wide(StoreDamagedError())
    assert not is_store_wide(ShepherdError("one operation's problem"))
    assert not is_store_wide(ValueError())


def test_a_long_detail_is_cut_and_kept_on_one_line() -> None:
    exc = sqlite3.OperationalError("disk I/O error\n" + "x" * 1000)
    message = classify(exc, "sqlite:///s.db").message
    assert message.startswith("the SQLite store s.db is unavailable: disk I/O error xxx")
    assert message.endswith("x…")
    assert len(message) < 300
