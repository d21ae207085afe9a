"""Tables that fit the terminal: fixed columns whole, middle ones cut then hidden, the wide one last."""

from __future__ import annotations

import pytest

from shepherd.cli.tables import NARROWEST, Column, cut, fit

COLUMNS = (
    Column("id"),
    Column("workflow", "middle", drop=1),
    Column("key", "middle", drop=2),
    Column("state"),
    Column("locked_by", "middle", drop=0),
    Column("error", "wide"),
)
ROW = ("01a208d352cf79e7f72c", "orders.process", "ORDER-2024-000123", "compensated", "", "x" * 90)


def test_everything_fits_at_natural_widths() -> None:
    rows = [("a", "wf", "k", "pending", "me", "boom")]

    assert fit(COLUMNS, rows, 200) == [2, 8, 3, 7, 9, 5]


def test_an_empty_middle_column_is_hidden() -> None:
    assert fit(COLUMNS, [ROW], 400)[4] is None


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_the_line_fits_and_fixed_columns_stay_whole(width: int) -> None:
    widths = fit(COLUMNS, [ROW], width)

    shown = [w for w in widths if w is not None]
    assert sum(shown) + 2 * (len(shown) - 1) <= width
    assert (widths[0], widths[3]) == (20, 11)
    assert (widths[5] or 0) >= NARROWEST


def test_middle_columns_give_way_before_the_error() -> None:
    roomy = fit(COLUMNS, [ROW], 120)
    widths = fit(COLUMNS, [ROW], 100)

    assert roomy[1:3] == [14, 17]  # room enough for the error to keep 40: names whole

    assert 0 < (widths[1] or 0) < len("orders.process")
    assert (widths[5] or 0) >= 40


def test_at_80_columns_middle_columns_hide_by_their_order() -> None:
    widths = fit(COLUMNS, [ROW], 80)

    assert widths[1] is None  # workflow hides before key
    assert widths[2] is not None


def test_cut_keeps_one_line_and_marks_the_cut() -> None:
    assert cut("line one\nline two", 40) == "line one line two"
    assert cut("abcdefghij", 5) == "abcd…"
    assert cut("abc", 3) == "abc"
