"""The store's binary array dumpers: what they send reads back as sent, or is refused.

Lists whose first element is a str, an int or a float are dumped by
`shepherd.store.postgres.arrays`; every other list by psycopg, as before. Each
case is sent to the server and read back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from shepherd.store.postgres import arrays

pytestmark = pytest.mark.postgres


@pytest.fixture
async def conn(postgres_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        arrays.register(conn)
        yield conn


async def _back(conn: psycopg.AsyncConnection[Any], cast: str, value: list[Any]) -> Any:
    cursor = await conn.execute(f"SELECT %b::{cast}", (value,))
    row = await cursor.fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize(
    ("cast", "value"),
    [
        ("text[]", ["a", None, "é ü 😀", "", "x" * 10_000]),
        ("text[]", ["only"]),
        ("int[]", [1, None, -3, 2**31 - 1]),
        ("bigint[]", [2**62, -(2**62)]),
        ("float8[]", [1.5, None, -0.0, 1e300]),
        ("float8[]", [30, 2.5]),  # an int first, then a float: float8
        ("float8[]", [30.0, 2]),
        ("float8[]", [30]),  # ints only, cast by the statement
        ("text[]", []),
        ("int[]", [None, None]),
        ("timestamptz[]", [None]),
        ("boolean[]", [True, None, False]),  # not dumped here: psycopg's
        ("timestamptz[]", [datetime(2030, 1, 1, tzinfo=UTC)]),  # psycopg's
        ("int[]", [[1, 2], [3, 4]]),  # nested: psycopg's
    ],
)
async def test_a_list_reads_back_as_it_was_sent(
    conn: psycopg.AsyncConnection[Any], cast: str, value: list[Any]
) -> None:
    assert await _back(conn, cast, value) == value


async def test_a_list_of_text_and_ints_is_refused_naming_both(
    conn: psycopg.AsyncConnection[Any],
) -> None:
    with pytest.raises(psycopg.DataError, match=r"a list of int, str cannot be sent as text\[\]"):
        await _back(conn, "text[]", ["a", 1])


async def test_text_with_a_nul_is_refused(conn: psycopg.AsyncConnection[Any]) -> None:
    with pytest.raises(psycopg.DataError, match="NUL"):
        await _back(conn, "text[]", ["a", "b\x00c"])


async def test_an_int_beyond_bigint_is_refused(conn: psycopg.AsyncConnection[Any]) -> None:
    with pytest.raises(psycopg.DataError, match=r"a list of int cannot be sent as int8\[\]"):
        await _back(conn, "bigint[]", [1, 2**70])
