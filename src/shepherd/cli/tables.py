"""Plain-text tables that fit the terminal: one line per row, cut with an ellipsis.

Each column is `fixed` (ids, states, numbers, times: never cut), `middle`
(names: cut first, then hidden, by `drop` order, when even cut they leave too
little room), `wrap` (a list such as `scheduler,agent,supervisor`: wrapped
over several lines, after a comma or a space, rather than cut, never narrower
than its longest item, never hidden) or `wide` (the reason or detail at the
end of a row: cut last, never hidden). A column marked `below` leaves a row
that does not fit whole for lines of its own under it (`error: ...`, wrapped
to the width), lowest `drop` first, before anything is cut. Other cells stay
on one line; whitespace in them (newlines too) becomes one space. The width
is the terminal's (`COLUMNS` wins; 80 off a terminal).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import click
from rich.cells import cell_len, set_cell_size

__all__ = ["Column", "cut", "echo_table", "fit", "layout", "terminal_width", "wrap"]

#: Spaces between two columns.
GAP = 2
#: A middle column is not cut below this width (or its natural one, if less).
READABLE = 8
#: Room the wide column keeps before the middle columns stop shrinking.
COMFORT = 40
#: Below this width the wide column makes a middle column hide instead.
NARROWEST = 30
#: The most a line under a row is indented (under the second column when the first is narrow).
INDENT = 8
#: What a wrapped cell may break after: a comma, or a run of spaces.
_PIECE = re.compile(r"[^\s,]*,?\s*")


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: its header, how it gives way, how it is aligned."""

    header: str
    kind: Literal["fixed", "middle", "wrap", "wide"] = "fixed"
    #: Among middle columns, lower hides first; among `below` ones, lower leaves the row first.
    drop: int = 0
    right: bool = False
    #: Whether the column may leave a row that does not fit whole for a line under it.
    below: bool = False


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


def wrap(text: str, width: int) -> list[str]:
    """`text` on lines of at most `width` cells, broken after commas and spaces.

    A piece longer than `width` (a word with no comma or space to break at)
    is cut with `…`. Empty text is one empty line.
    """
    lines: list[str] = []
    line = ""
    for piece in filter(None, _PIECE.findall(" ".join(text.split()))):
        if line and cell_len((line + piece).rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    return [cut(each, width) for each in lines]


def _floor(column: Column, natural: int, cells: Sequence[str]) -> int:
    """How narrow a shrinking column may get: a wrap column's longest piece, else READABLE."""
    if column.kind == "wrap":
        pieces = (p.rstrip() for cell in cells for p in _PIECE.findall(" ".join(cell.split())))
        return max([cell_len(column.header), *(cell_len(p) for p in pieces)])
    return min(natural, READABLE)


def layout(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int
) -> tuple[list[int | None], list[int]]:
    """Each column's width on the row (None: hidden or under the row), and the columns under it.

    While the row's shown columns do not fit `width` at their natural widths,
    the `below` columns leave it, lowest `drop` first; then `fit` sizes what
    is left.
    """
    natural = _natural(columns, rows)
    leaving = sorted((i for i, c in enumerate(columns) if c.below), key=lambda i: columns[i].drop)
    under: list[int] = []
    while leaving:
        shown = _shown(columns, rows, under)
        if sum(natural[i] for i in shown) + GAP * (len(shown) - 1) <= width:
            break
        under.append(leaving.pop(0))
    return fit(columns, rows, width, under=under), under


def fit(
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    under: Collection[int] = (),
) -> list[int | None]:
    """Each column's width on a line of `width` cells, or None for a hidden column.

    Fixed columns keep their natural width (the widest of header and cells).
    Middle columns that are empty in every row are hidden, and so are the
    columns `under` the row. When the natural widths do not fit, the middle
    columns are cut and the wrap columns wrapped (the widest first, down to
    READABLE or a wrap column's longest piece) while the wide column keeps up
    to COMFORT; then the wide column is cut down to NARROWEST; then middle
    columns hide, by `drop`, and the room they free goes back to the others.
    A line may still be longer than `width` when the fixed and wrap columns
    alone are.
    """
    natural = _natural(columns, rows)
    floors = [_floor(c, natural[i], [row[i] for row in rows]) for i, c in enumerate(columns)]
    shown = _shown(columns, rows, under)
    while True:
        sized = _sized(columns, natural, floors, shown, width)
        if sized is not None:
            return sized
        hideable = [i for i in shown if columns[i].kind == "middle"]
        if not hideable:
            return _squeezed(columns, natural, floors, shown)
        shown.remove(min(hideable, key=lambda i: (columns[i].drop, -i)))


def echo_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> None:
    """Print the table (header in bold on a terminal), fitted to `width`."""
    widths, under = layout(columns, rows, width)
    header = _lines(columns, [c.header for c in columns], widths)[0]
    click.echo(click.style(header, bold=True))
    first = next((w for w in widths if w is not None), 0)
    indent = first + GAP if first + GAP <= INDENT else 4
    for row in rows:
        for line in _lines(columns, row, widths):
            click.echo(line)
        for i in sorted(under):  # in the columns' order, whichever left first
            if row[i].strip():
                for line in _under(columns[i].header, row[i], indent, width):
                    click.echo(line)


def _natural(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    return [
        max([cell_len(c.header), *(cell_len(" ".join(row[i].split())) for row in rows)])
        for i, c in enumerate(columns)
    ]


def _shown(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], under: Collection[int]
) -> list[int]:
    """The columns on the row: not under it, and not a middle one empty in every row."""
    return [
        i
        for i, c in enumerate(columns)
        if i not in under and (c.kind != "middle" or any(row[i].strip() for row in rows))
    ]


def _sized(
    columns: Sequence[Column],
    natural: list[int],
    floors: list[int],
    shown: list[int],
    width: int,
) -> list[int | None] | None:
    """The widths with these columns shown, or None if one more must hide."""
    out: list[int | None] = [None] * len(columns)
    for i in shown:
        out[i] = natural[i]
    middles = [i for i in shown if columns[i].kind in ("middle", "wrap")]
    wides = [i for i in shown if columns[i].kind == "wide"]
    room = width - GAP * (len(shown) - 1)
    room -= sum(natural[i] for i in shown if columns[i].kind == "fixed")
    wanted = sum(natural[i] for i in (*middles, *wides))
    if wanted <= room:
        return out
    wide_natural = sum(natural[i] for i in wides)
    lows = [floors[i] for i in middles]
    for_middles = room - min(wide_natural, COMFORT * len(wides))
    if for_middles < sum(lows):
        for_middles = sum(lows)
    level = _level([natural[i] for i in middles], lows, for_middles)
    for i, low in zip(middles, lows, strict=True):
        out[i] = max(low, min(natural[i], level))
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
    columns: Sequence[Column], natural: list[int], floors: list[int], shown: list[int]
) -> list[int | None]:
    """Nothing left to hide: wrap columns at their floor, the wide one at its narrowest."""
    out: list[int | None] = [None] * len(columns)
    for i in shown:
        kind = columns[i].kind
        if kind == "wide":
            out[i] = min(natural[i], NARROWEST)
        elif kind == "wrap":
            out[i] = floors[i]
        else:
            out[i] = natural[i]
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


def _lines(
    columns: Sequence[Column], cells: Sequence[str], widths: Sequence[int | None]
) -> list[str]:
    """One row's lines: one, or as many as its most wrapped cell needs."""
    shown = [
        (column, wrap(cell, width) if column.kind == "wrap" else [cut(cell, width)], width)
        for column, cell, width in zip(columns, cells, widths, strict=True)
        if width is not None
    ]
    height = max((len(texts) for _, texts, _ in shown), default=1)
    lines = []
    for n in range(height):
        parts = []
        for column, texts, width in shown:
            text = texts[n] if n < len(texts) else ""
            pad = " " * (width - cell_len(text))
            parts.append(pad + text if column.right else text + pad)
        lines.append((" " * GAP).join(parts).rstrip())
    return lines


def _under(header: str, text: str, indent: int, width: int) -> list[str]:
    """A cell that left its row: `header: text`, indented, wrapped to `width`."""
    label = f"{header}: "
    lines = wrap(text, max(10, width - indent - cell_len(label)))
    first = " " * indent + label + lines[0]
    return [first, *(" " * (indent + cell_len(label)) + line for line in lines[1:])]
