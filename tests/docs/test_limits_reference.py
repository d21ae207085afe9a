"""docs/reference/limits.md and the store-error table of docs/reference/errors.md say what the code does."""

from __future__ import annotations

import re

import pytest
from doctools import DOCS

from shepherd.core import limits
from shepherd.store.postgres.sqlstates import Kind, kind_of

LIMITS = DOCS / "reference" / "limits.md"
ERRORS = DOCS / "reference" / "errors.md"


def test_each_limit_in_the_table_is_the_constant_it_names() -> None:
    cells = re.findall(r"\| ([\d,]+) [^|]*\(`(\w+)`\) \|", LIMITS.read_text())
    assert {name for _, name in cells} == {"KEY_BYTES", "NAME_BYTES", "OPERATOR_NAME_BYTES"}
    for number, name in cells:
        assert int(number.replace(",", "")) == getattr(limits, name), name


def test_the_example_message_is_the_one_given() -> None:
    problem = limits.too_long("key", "a" * (limits.KEY_BYTES + 1), limits.KEY_BYTES)
    assert problem is not None
    example = "key is 1025 bytes of UTF-8, over its limit of 1024 bytes (it starts '"
    assert example in LIMITS.read_text()
    assert problem.startswith(example)


def _store_error_rows() -> list[tuple[str, str]]:
    """The PostgreSQL column and the error column of each row of the store-error table."""
    text = ERRORS.read_text().split("## What a store error becomes", 1)[1]
    table = text.split("\n\n")[2]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return [(row[0], row[2]) for row in rows]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("`StoreUnavailableError`", Kind.UNAVAILABLE),
        ("`StoreFullError`", Kind.FULL),
        ("`StoreDamagedError`", Kind.DAMAGED),
        ("`PayloadError`", Kind.VALUE),
    ],
)
def test_each_sqlstate_the_table_names_has_its_rows_kind(error: str, kind: Kind) -> None:
    (postgres,) = [pg for pg, err in _store_error_rows() if err.startswith(error)]
    codes = re.findall(r"`(\w{5})`", postgres)
    classes = re.findall(r"`(\w\w)xxx`", postgres)
    assert codes or classes
    for code in codes:
        assert kind_of(code) is kind, code
    for prefix in classes:
        assert kind_of(f"{prefix}000") is kind, prefix
