"""Plain-text tables that fit the terminal: one line per row, cut with an ellipsis.

Each column is `fixed` (ids, states, numbers: never cut), `middle` (names and
times: cut first, then hidden, by `drop` order, when even cut they leave too
little room) or `wide` (the reason or detail at the end of a row: cut last,
never hidden). A cell never wraps; whitespace in it (newlines too) becomes one
space. The width is the terminal's (`COLUMNS` wins; 80 off a terminal).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import click
from rich.cells import cell_len, set_cell_size

__all__ = ["Column", "cut", "echo_table", "fit", "terminal_width"]

#: Spaces between two columns.
GAP = 2
#: A middle column is not cut below this width (or its natural one, if less).
READABLE = 8
#: Room the wide column keeps before the middle columns stop shrinking.
COMFORT = 40
#: Below this width the wide column makes a middle column hide instead.
NARROWEST = 30


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, how it gives way, how it is aligned."""

    header: str
    kind: Literal["fixed", "middle", "wide"] = "fixed"
    #: Among middle columns, lower hides first when the line is too narrow.
    drop: int = 0
    right: bool = False


def terminal_width() -> int:
    """The width tables fit: `COLUMNS`, else the terminal's, else 80."""
    return max(20, shutil.get_terminal_size(fallback=(80, 24)).columns)


def cut(text: str, width: int) -> str:
    """`text` on one line, at most `width` cells, ending with `…` when cut."""
    flat = " ".join(text.split())
    if cell_len(flat) <= width:
        return flat
    if width <= 1:
        return "…"[:width]
    return set_cell_size(flat, width - 1).rstrip() + "…"


def fit(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int | None]:
    """Each column's width on a line of `width` cells, or None for a hidden column.

    Fixed columns keep their natural width (the widest of header and cells).
    Middle columns that are empty in every row are hidden. When the natural
    widths do not fit, the middle columns are cut (the widest first, down to
    READABLE) while the wide column keeps up to COMFORT; then the wide column
    is cut down to NARROWEST; then middle columns hide, by `drop`, and the
    room they free goes back to the others. A line may still be longer than
    `width` when the fixed columns alone are.
    """
    natural = [
        max([cell_len(c.header), *(cell_len(" ".join(row[i].split())) for row in rows)])
        for i, c in enumerate(columns)
    ]
    shown = [
        i
        for i, c in enumerate(columns)
        if c.kind != "middle" or any(row[i].strip() for row in rows)
    ]
    while True:
        sized = _sized(columns, natural, shown, width)
        if sized is not None:
            return sized
        hideable = [i for i in shown if columns[i].kind == "middle"]
        if not hideable:
            return _squeezed(columns, natural, shown, width)
        shown.remove(min(hideable, key=lambda i: (columns[i].drop, -i)))


def echo_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> None:
    """Print the table (header in bold on a terminal), fitted to `width`."""
    widths = fit(columns, rows, width)
    header = _line(columns, [c.header for c in columns], widths)
    click.echo(click.style(header, bold=True))
    for row in rows:
        click.echo(_line(columns, row, widths))


def _sized(
    columns: Sequence[Column], natural: list[int], shown: list[int], width: int
) -> list[int | None] | None:
    """The widths with these columns shown, or None if one more must hide."""
    out: list[int | None] = [None] * len(columns)
    for i in shown:
        out[i] = natural[i]
    middles = [i for i in shown if columns[i].kind == "middle"]
    wides = [i for i in shown if columns[i].kind == "wide"]
    room = width - GAP * (len(shown) - 1)
    room -= sum(natural[i] for i in shown if columns[i].kind == "fixed")
    wanted = sum(natural[i] for i in (*middles, *wides))
    if wanted <= room:
        return out
    wide_natural = sum(natural[i] for i in wides)
    floors = [min(natural[i], READABLE) for i in middles]
    for_middles = room - min(wide_natural, COMFORT * len(wides))
    if for_middles < sum(floors):
        for_middles = sum(floors)
    level = _level([natural[i] for i in middles], floors, for_middles)
    for i, floor in zip(middles, floors, strict=True):
        out[i] = max(floor, min(natural[i], level))
    left = room - sum(out[i] or 0 for i in middles)
    if not wides:
        return out if left >= 0 else None
    narrowest = min(wide_natural, NARROWEST)
    if left < narrowest:
        return None
    # One wide column is the rule; several share the room by their natural widths.
    for i in wides:
        out[i] = min(natural[i], max(1, left * natural[i] // max(1, wide_natural)))
    return out


def _squeezed(
    columns: Sequence[Column], natural: list[int], shown: list[int], width: int
) -> list[int | None]:
    """Nothing left to hide: the wide column at its narrowest, the line over `width`."""
    out: list[int | None] = [None] * len(columns)
    for i in shown:
        out[i] = natural[i] if columns[i].kind != "wide" else min(natural[i], NARROWEST)
    return out


def _level(natural: list[int], floors: list[int], room: int) -> int:
    """The largest cap that makes the capped widths (never under their floors) fit `room`."""
    level = max(natural, default=0)
    while (
        level > 0
        and sum(max(f, min(n, level)) for n, f in zip(natural, floors, strict=True)) > room
    ):
        level -= 1
    return level


def _line(columns: Sequence[Column], cells: Sequence[str], widths: Sequence[int | None]) -> str:
    parts = []
    for column, cell, width in zip(columns, cells, widths, strict=True):
        if width is None:
            continue
        text = cut(cell, width)
        pad = " " * (width - cell_len(text))
        parts.append(pad + text if column.right else text + pad)
    return (" " * GAP).join(parts).rstrip()
