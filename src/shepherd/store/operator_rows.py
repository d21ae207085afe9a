"""Operators (named tokens) as rows, for both backends; and the checks before an operator's write.

A token is `secrets.token_urlsafe(32)` (256 random bits), shown once to whoever
makes it; the store keeps only its SHA-256 hash, so a copy of the database
opens no session. A token is looked up by its hash (an index on it), and the
hash found is compared again with `hmac.compare_digest`. Every name and `by`
is checked here, by the facade, before an operation is queued: a refused one
raises a `ConfigError` naming what was wrong, and nothing is read or written.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta
from typing import ClassVar

from shepherd.core.limits import NAME_BYTES, OPERATOR_NAME_BYTES, too_long
from shepherd.core.overview import Operator
from shepherd.errors import ConfigError, TooLongError
from shepherd.store.rows import Columns, Instant, Row

__all__ = [
    "MAX_BUCKETS",
    "MAX_NAME_CHARS",
    "MAX_SEQ",
    "MAX_TOKEN_CHARS",
    "OPERATOR_COLUMNS",
    "OperatorCol",
    "checked_actor",
    "checked_buckets",
    "checked_operator_name",
    "checked_seq",
    "new_token",
    "operator_from_row",
    "token_hash",
]

#: The most characters an operator's name may have (ASCII: as many bytes).
MAX_NAME_CHARS = OPERATOR_NAME_BYTES
#: The most buckets a throughput read returns.
MAX_BUCKETS = 10_000
#: Longer texts are not tokens of ours: refused without hashing them.
MAX_TOKEN_CHARS = 200
#: The largest step number a store holds (a step's `seq` is a signed 32-bit integer).
MAX_SEQ = 2**31 - 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")


class OperatorCol(Columns):
    """A row of OPERATOR_COLUMNS."""

    NAME: ClassVar[int]
    CREATED_AT: ClassVar[int]
    LAST_USED_AT: ClassVar[int]
    TOKEN_HASH: ClassVar[int]


OPERATOR_COLUMNS = OperatorCol.select()


def operator_from_row(row: Row, instant: Instant) -> Operator:
    """An Operator from a row of OPERATOR_COLUMNS (`instant`: the backend's time column to UTC)."""
    name, created_at, last_used_at, _hash = row
    return Operator(
        name=name,
        created_at=instant(created_at),
        last_used_at=None if last_used_at is None else instant(last_used_at),
    )


def new_token() -> str:
    """A new secret token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """What the store keeps of `token`: its SHA-256, in hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def checked_operator_name(name: object) -> str:
    """`name` if it can name an operator.

    A name is 1 to MAX_NAME_CHARS characters: ASCII letters and digits, and
    `.`, `_`, `@`, `-` after the first (`alice`, `ops-bot`, `j.doe@example`).

    Raises:
        ConfigError: It is not such a str (field `name`).
    """
    if not isinstance(name, str):
        raise ConfigError("name", f"an operator's name is a str, not {type(name).__name__}")
    if not name:
        raise ConfigError("name", "an operator's name is empty")
    if len(name) > MAX_NAME_CHARS:
        raise ConfigError("name", f"{name[:40]!r}... is longer than {MAX_NAME_CHARS} characters")
    if not _NAME.fullmatch(name):
        raise ConfigError(
            "name",
            f"{name!r}: an operator's name is ASCII letters and digits, "
            "then also '.', '_', '@' or '-'",
        )
    return name


def checked_actor(by: object) -> str | None:
    """Who retries or cancels a task, as recorded: `by` without surrounding spaces (None stays).

    Raises:
        ConfigError: `by` is not a str, is empty (or only spaces), is longer
            than NAME_BYTES of UTF-8, or holds a control character or a lone
            surrogate (field `by`).
    """
    if by is None:
        return None
    if not isinstance(by, str):
        raise ConfigError("by", f"who acts on a task is a str, not {type(by).__name__}")
    name = by.strip()
    if not name:
        raise ConfigError("by", "'by' is empty: name who acts, or leave it out")
    if (problem := too_long("by", name, NAME_BYTES)) is not None:
        raise TooLongError("by", problem)
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise ConfigError("by", f"{name!r} contains a control character or a lone surrogate")
    return name


def checked_seq(seq: object) -> int | None:
    """The step a retry resubmits: `seq` if a store can hold it (None stays).

    A step's `seq` is a signed 32-bit integer in both backends; within that
    range a step that does not exist is the store's to refuse ("step N missing").

    Raises:
        ConfigError: `seq` is not a whole number from -2**31 to MAX_SEQ (field `seq`).
    """
    if seq is None:
        return None
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise ConfigError("seq", f"a step number is a whole number, not {seq!r}")
    if not -MAX_SEQ - 1 <= seq <= MAX_SEQ:  # not written out: it may have thousands of digits
        raise ConfigError("seq", f"a step number is at most {MAX_SEQ}, and at least {-MAX_SEQ - 1}")
    return seq


def checked_buckets(window: object, bucket: object) -> float:
    """The bucket's length in seconds, if `window` cut in `bucket`s makes at most MAX_BUCKETS.

    Raises:
        ConfigError: Either is not a positive timedelta, or there would be
            more buckets (field `bucket`).
    """
    for field, value in (("window", window), ("bucket", bucket)):
        if not isinstance(value, timedelta) or value <= timedelta(0):
            raise ConfigError(field, f"must be a positive timedelta, not {value!r}")
    assert isinstance(window, timedelta)
    assert isinstance(bucket, timedelta)
    if window / bucket > MAX_BUCKETS:
        raise ConfigError(
            "bucket", f"{window} in buckets of {bucket} is over {MAX_BUCKETS} buckets"
        )
    return bucket.total_seconds()
