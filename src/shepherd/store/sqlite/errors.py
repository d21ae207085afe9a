"""What a `sqlite3` error means for the SQLite store, as a ShepherdError.

No driver error reaches a caller of the store: every `sqlite3.Error` that
leaves it is translated here, the original kept as `__cause__` for the logs.
The result code decides (one table, `_BY_CODE`); the message decides for
errors raised by the `sqlite3` module itself (text that is not UTF-8), which
carry no code, and for SQLITE_ERROR, SQLite's code for "anything else".

    SQLITE_FULL, "database or disk is full"     -> StoreFullError (a passing condition)
    SQLITE_CORRUPT, SQLITE_NOTADB, undecodable   -> StoreDamagedError (workers stop)
      text, missing table or column
    SQLITE_BUSY, SQLITE_LOCKED (past the busy    -> StoreUnavailableError (roles retry)
      timeout), SQLITE_IOERR, SQLITE_CANTOPEN,
      SQLITE_READONLY, SQLITE_PERM, SQLITE_NOMEM,
      SQLITE_PROTOCOL, SQLITE_NOLFS,
      SQLITE_INTERRUPT, SQLITE_SCHEMA; an
      OperationalError without a code
    SQLITE_TOOBIG, sqlite3.DataError             -> PayloadError (a value too large to keep)
    SQLITE_ERROR (a statement SQLite refused),   -> ShepherdError naming SQLite's message
      SQLITE_CONSTRAINT, SQLITE_MISMATCH,           (not passing: never "unavailable")
      SQLITE_RANGE, SQLITE_MISUSE, SQLITE_AUTH,
      IntegrityError, ProgrammingError

The same table is in docs/reference/errors.md.
"""

from __future__ import annotations

import sqlite3

from shepherd.errors import (
    PayloadError,
    ShepherdError,
    StoreDamagedError,
    StoreFullError,
    StoreUnavailableError,
)

__all__ = ["classify", "is_busy", "is_store_wide", "translate"]

_FULL = "full"
_DAMAGED = "damaged"
_BUSY = "busy"
_UNAVAILABLE = "unavailable"
_OTHER = "other"
_VALUE = "value"
_REFUSED = "refused"

#: Primary result codes (the low byte of an extended code) and what they mean.
_BY_CODE = {
    sqlite3.SQLITE_FULL: _FULL,
    sqlite3.SQLITE_CORRUPT: _DAMAGED,
    sqlite3.SQLITE_NOTADB: _DAMAGED,
    sqlite3.SQLITE_BUSY: _BUSY,
    sqlite3.SQLITE_LOCKED: _BUSY,
    sqlite3.SQLITE_IOERR: _UNAVAILABLE,
    sqlite3.SQLITE_CANTOPEN: _UNAVAILABLE,
    sqlite3.SQLITE_READONLY: _UNAVAILABLE,
    sqlite3.SQLITE_PERM: _UNAVAILABLE,
    sqlite3.SQLITE_NOMEM: _UNAVAILABLE,
    sqlite3.SQLITE_PROTOCOL: _UNAVAILABLE,
    sqlite3.SQLITE_NOLFS: _UNAVAILABLE,
    sqlite3.SQLITE_INTERRUPT: _UNAVAILABLE,
    sqlite3.SQLITE_SCHEMA: _UNAVAILABLE,
    sqlite3.SQLITE_TOOBIG: _VALUE,
    sqlite3.SQLITE_CONSTRAINT: _REFUSED,
    sqlite3.SQLITE_MISMATCH: _REFUSED,
    sqlite3.SQLITE_RANGE: _REFUSED,
    sqlite3.SQLITE_MISUSE: _REFUSED,
    sqlite3.SQLITE_AUTH: _REFUSED,
}
#: Message fragments (lower case), for errors without a telling code.
_BY_TEXT = (
    ("database or disk is full", _FULL),
    ("database disk image is malformed", _DAMAGED),
    ("malformed database schema", _DAMAGED),
    ("file is not a database", _DAMAGED),
    ("could not decode to utf-8", _DAMAGED),
    ("no such table", _DAMAGED),
    ("no such column", _DAMAGED),
    ("database is locked", _BUSY),
    ("database table is locked", _BUSY),
    ("disk i/o error", _UNAVAILABLE),
    ("unable to open database file", _UNAVAILABLE),
    ("readonly database", _UNAVAILABLE),
    ("string or blob too big", _VALUE),
)
#: Conditions of the whole file or disk: every operation would meet them alike.
_STORE_WIDE = frozenset({_FULL, _DAMAGED, _BUSY, _UNAVAILABLE})
#: Longest cause quoted in a message (an undecodable row quotes its text).
_MAX_DETAIL = 200


def classify(exc: sqlite3.Error, url: str) -> ShepherdError:
    """The ShepherdError that `exc`, met on the store at `url`, means for its caller.

    Args:
        exc: What `sqlite3` raised.
        url: The store's URL (`sqlite:///path`); messages name its file.

    Returns:
        StoreFullError, StoreDamagedError or StoreUnavailableError for a
        condition of the file or its disk; PayloadError for a value too large
        to keep; a plain ShepherdError for a statement SQLite refused (a
        constraint, a misused API: a mistake of ours).
    """
    path = url.removeprefix("sqlite://").removeprefix("/")
    detail = _detail(exc)
    kind = _kind(exc)
    if kind == _FULL:
        return StoreFullError(
            f"the store's disk is full: {path} (free space, then the roles resume by themselves)"
        )
    if kind == _DAMAGED:
        return StoreDamagedError(
            f"the store file {path} is damaged ({detail}): "
            "run `PRAGMA integrity_check`, restore from a backup"
        )
    if kind == _BUSY:
        return StoreUnavailableError(
            f"the SQLite store {path} is busy: another connection held its lock "
            f"past store_timeout, the busy timeout ({detail})"
        )
    if kind in (_UNAVAILABLE, _OTHER):
        return StoreUnavailableError(f"the SQLite store {path} is unavailable: {detail}")
    if kind == _VALUE:
        return PayloadError(
            f"the SQLite store {path} refused a value too large to keep ({detail}); "
            "nothing was written"
        )
    return ShepherdError(f"the SQLite store {path} refused a statement: {detail}")


def translate(exc: BaseException, url: str) -> BaseException:
    """`classify(exc, url)` with `exc` as its cause if `exc` is a `sqlite3.Error`, else `exc`."""
    if not isinstance(exc, sqlite3.Error):
        return exc
    error = classify(exc, url)
    error.__cause__ = exc
    return error


def is_store_wide(exc: BaseException) -> bool:
    """Whether `exc` is a condition of the whole store (full, damaged, locked, unreachable).

    Such an error is not one operation's fault: running a batch's operations one
    by one would only meet it again, once per operation.
    """
    if isinstance(exc, sqlite3.Error):
        return _kind(exc) in _STORE_WIDE
    return isinstance(exc, StoreUnavailableError | StoreDamagedError)


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says another connection holds the lock (busy or locked)."""
    return _kind(exc) == _BUSY


def _kind(exc: sqlite3.Error) -> str:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        kind = _BY_CODE.get(code & 0xFF)
        if kind is not None:
            return kind
    text = str(exc).lower()
    for fragment, kind in _BY_TEXT:
        if fragment in text:
            return kind
    if code is not None and code & 0xFF == sqlite3.SQLITE_ERROR:
        return _REFUSED  # a statement SQLite refused: retrying would meet it again
    if isinstance(exc, sqlite3.DataError):
        return _VALUE
    if type(exc) in (sqlite3.OperationalError, sqlite3.DatabaseError, sqlite3.InternalError):
        return _OTHER  # unexpected, maybe this statement's alone: unavailable, not store-wide
    return _REFUSED


def _detail(exc: sqlite3.Error) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > _MAX_DETAIL:
        text = text[: _MAX_DETAIL - 1] + "…"
    return text
