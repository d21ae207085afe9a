"""Tables that fit the terminal: fixed columns whole, middle ones cut then hidden, the wide one last."""

from __future__ import annotations

import pytest

from shepherd.cli.tables import NARROWEST, Column, cut, echo_table, fit, layout, wrap

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


def test_wrap_breaks_after_commas_and_spaces_and_cuts_only_a_piece_too_long() -> None:
    assert wrap("scheduler,agent,supervisor", 16) == ["scheduler,agent,", "supervisor"]
    assert wrap("scheduler,agent,supervisor", 10) == ["scheduler,", "agent,", "supervisor"]
    assert wrap("card declined by the\nissuer", 12) == ["card", "declined by", "the issuer"]
    assert wrap("", 5) == [""]
    assert wrap("abcdefghij", 5) == ["abcd…"]


WORKERS = (
    Column("instance"),
    Column("state"),
    Column("started", below=True, drop=1),
    Column("roles", "wrap"),
    Column("agents", "wide", below=True),
)
WORKER = ("orders-worker-7d9f8b6c4-x2kqz:1:3f9a", "alive", "2026-11-26 14:36:30Z",
          "scheduler,agent,supervisor", "payments.charge, payments.refund")  # fmt: skip


def test_below_columns_leave_the_row_lowest_drop_first_and_only_when_it_does_not_fit() -> None:
    assert layout(WORKERS, [WORKER], 200) == ([36, 5, 20, 26, 32], [])
    assert layout(WORKERS, [WORKER], 120) == ([36, 5, 20, 26, None], [4])
    assert layout(WORKERS, [WORKER], 80) == ([36, 5, None, 26, None], [4, 2])


def test_a_wrap_column_narrows_to_its_longest_piece_and_is_never_hidden() -> None:
    widths, under = layout(WORKERS, [WORKER], 60)

    assert under == [4, 2]
    assert widths == [36, 5, None, 15, None]  # the room left: its roles wrap in it
    assert fit(WORKERS, [WORKER], 30, under=under)[3] == len("supervisor")


def test_a_row_prints_its_wrapped_cells_and_the_cells_under_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo_table(WORKERS, [WORKER], 64)

    assert capsys.readouterr().out.splitlines() == [
        "instance                              state  roles",
        "orders-worker-7d9f8b6c4-x2kqz:1:3f9a  alive  scheduler,agent,",
        "                                             supervisor",
        "    started: 2026-11-26 14:36:30Z",
        "    agents: payments.charge, payments.refund",
    ]
