"""The errors reference lists every error of `shepherd.errors`, where the tree puts it, and
marks (✓) exactly those `shepherd` exports.
"""

from __future__ import annotations

import inspect
import re

from doctools import DOCS, code_blocks

import shepherd
from shepherd import errors

PAGE = DOCS / "reference" / "errors.md"


def error_classes() -> dict[str, type[errors.ShepherdError]]:
    """The public error classes of `shepherd.errors`, by name."""
    return {
        name: value
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, errors.ShepherdError)
        and value.__module__.partition("._")[0].partition(".resources")[0] == errors.__name__
        and not name.startswith("_")
    }


def table_rows() -> dict[str, str]:
    """The table's rows by error name: the ✓ column's text."""
    rows = re.findall(r"^\| `(\w+)` \| (✓)? ?\|", PAGE.read_text(), re.MULTILINE)
    return dict(rows)


def tree() -> dict[str, str | None]:
    """Each error of the page's tree and its parent there (None for the root)."""
    (block,) = [b for b in code_blocks(PAGE.read_text(), "text") if b.text.startswith("Shepherd")]
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in block.text.splitlines():
        found = re.match(r"^((?:[│ ]   )*)(?:[├└]── )?(\w+)", line)
        assert found is not None, line
        depth = len(found[1]) // 4 + (1 if "──" in line else 0)
        del path[depth:]
        parents[found[2]] = path[-1] if path else None
        path.append(found[2])
    return parents


def test_every_error_has_a_row_and_a_place_in_the_tree() -> None:
    names = set(error_classes())
    assert names - set(table_rows()) == set(), "errors without a row in the table"
    assert names - set(tree()) == set(), "errors missing from the tree"
    assert set(table_rows()) - names == set(), "rows for errors that do not exist"


def test_the_tree_is_the_class_hierarchy() -> None:
    classes = error_classes()
    for name, parent in tree().items():
        if parent is None:
            assert name == "ShepherdError"
        else:
            assert issubclass(classes[name], classes[parent]), f"{name} is no {parent}"


def test_the_errors_marked_are_those_shepherd_exports() -> None:
    marked = {name for name, mark in table_rows().items() if mark}
    exported = {name for name in shepherd.__all__ if name in error_classes()}
    assert marked == exported
