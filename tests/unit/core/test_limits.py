"""`shepherd.core.limits`: each limit counted in bytes of UTF-8, at the limit and one byte past it."""

from __future__ import annotations

import pytest

from shepherd.core.limits import (
    KEY_BYTES,
    NAME_BYTES,
    POSTGRES_INDEX_ROW_BYTES,
    too_long,
    utf8_bytes,
)

#: A character of 4 bytes in UTF-8 (MUSICAL SYMBOL G CLEF).
CLEF = "\U0001d11e"


def test_a_four_byte_character_counts_four() -> None:
    assert utf8_bytes(CLEF) == 4
    assert utf8_bytes("é") == 2
    assert utf8_bytes("abc") == 3


@pytest.mark.parametrize("limit", [KEY_BYTES, NAME_BYTES])
def test_the_longest_value_is_accepted_and_one_byte_more_is_refused(limit: int) -> None:
    longest = CLEF * (limit // 4)
    assert utf8_bytes(longest) == limit
    assert too_long("key", longest, limit) is None

    problem = too_long("key", "a" + longest, limit)

    assert problem is not None
    assert problem.startswith(f"key is {limit + 1} bytes of UTF-8, over its limit of {limit} bytes")


def test_a_value_of_few_characters_but_many_bytes_is_refused() -> None:
    # 257 characters: short in characters, 1,028 bytes.
    assert too_long("reply_to", CLEF * 257, KEY_BYTES) is not None


def test_the_widest_index_row_fits_postgres_with_room() -> None:
    # (workflow, key), (agent, owner key): two texts, each with a 4-byte length
    # header, in an index tuple with an 8-byte header and a 6-byte item pointer.
    widest = NAME_BYTES + KEY_BYTES + 2 * 4 + 8 + 6 + 8  # and an 8-byte id (calls_of_key)
    assert widest <= POSTGRES_INDEX_ROW_BYTES - 800
