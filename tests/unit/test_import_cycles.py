"""No import cycles in shepherd, not even through imports made only for type checking.

Two modules that need each other, however far round, make the order of imports
matter and each one unreadable without the other; an import made only under
`if TYPE_CHECKING:` (or inside a function) is still a dependency of the code that
reads it. The graph is grimp's, the one import-linter reads: it holds every import,
whatever guards it. Importing `a.b.c` also runs the `__init__` of package `a.b`, so
it counts as importing `a.b` too, unless the importer lies inside `a.b` (which is
then already being imported); an import that names `a.b` itself always counts.

`scripts/check` runs this file (`python tests/unit/test_import_cycles.py`: it prints
each cycle, import by import, and fails); the suite runs its tests.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = "shepherd"

#: Imports left out of the graph while the cycle each closes is being removed
#: (none now: issue 31's parts removed them all). An entry that no longer closes a
#: cycle fails the check, so that the list only ever shrinks.
ALLOWED: frozenset[tuple[str, str]] = frozenset()

#: An edge of the graph -> the import that makes it (importer, imported).
Edges = dict[str, dict[str, tuple[str, str]]]


def _packages(module: str) -> list[str]:
    """The packages that hold `module`, outermost first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def module_edges(graph: grimp.ImportGraph, *, leave_out: Iterable[tuple[str, str]] = ()) -> Edges:
    """Each module's imports, with the packages each import also runs, less `leave_out`."""
    left_out = set(leave_out)
    edges: Edges = {}
    for importer in graph.modules:
        own = {importer, *_packages(importer)}
        found = edges.setdefault(importer, {})
        for imported in graph.find_modules_directly_imported_by(importer):
            if (importer, imported) in left_out:
                continue
            if imported != importer:
                found.setdefault(imported, (importer, imported))
            for package in _packages(imported):
                if package not in own:
                    found.setdefault(package, (importer, imported))
    return edges


def components(edges: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(edges.get(start, {}))))]
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, {})))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def shortest_cycle(edges: Mapping[str, Mapping[str, object]], component: list[str]) -> list[str]:
    """A shortest cycle through the first module of `component`: its modules in order."""
    start = component[0]
    inside = set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(edges.get(node, {})):
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if target in inside and target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise AssertionError(f"no cycle through {start} in its component")


def _where(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    return "; ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)


def problems(graph: grimp.ImportGraph, allowed: Iterable[tuple[str, str]] = ALLOWED) -> list[str]:
    """Each import cycle outside `allowed`, printed import by import; each stale entry of it."""
    allowed = set(allowed)
    found = []
    edges = module_edges(graph, leave_out=allowed)
    for component in components(edges):
        cycle = shortest_cycle(edges, component)
        lines = [f"import cycle among {', '.join(component)}:"]
        for importer, target in zip(cycle, [*cycle[1:], cycle[0]], strict=True):
            _, imported = edges[importer][target]
            through = "" if imported == target else f" (importing {imported} runs {target})"
            lines.append(f"  {importer} -> {target}{through}: {_where(graph, importer, imported)}")
        found.append("\n".join(lines))
    cycling = {m: i for i, c in enumerate(components(module_edges(graph))) for m in c}
    for importer, imported in sorted(allowed):
        runs = [imported, *_packages(imported)]
        closes = graph.direct_import_exists(importer=importer, imported=imported) and any(
            cycling.get(importer, -1) == cycling.get(target, -2) for target in runs
        )
        if not closes:
            found.append(
                f"allowed import {importer} -> {imported} closes no cycle any more:"
                " remove it from ALLOWED"
            )
    return found


def test_shepherd_has_no_import_cycle() -> None:
    found = problems(grimp.build_graph(ROOT, cache_dir=None))
    assert not found, "\n".join(found)


def _package(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_imports_for_type_checking_inside_a_function_or_of_the_own_package_close_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _package(
        tmp_path,
        {
            "cyc/__init__.py": "from cyc.e import E\n",
            "cyc/a.py": "from cyc import b\n",
            "cyc/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyc import a\n"
            ),
            "cyc/c.py": "def f():\n    from cyc import d\n",
            "cyc/d.py": "import cyc.c\n",
            "cyc/e.py": "E = 1\ndef f():\n    from cyc import E\n",
        },
    )
    monkeypatch.syspath_prepend(tmp_path)
    found = problems(grimp.build_graph("cyc", cache_dir=None), allowed=())
    assert [f.splitlines()[0] for f in found] == [
        "import cycle among cyc, cyc.e:",
        "import cycle among cyc.a, cyc.b:",
        "import cycle among cyc.c, cyc.d:",
    ]
    assert "  cyc.b -> cyc.a: line 3: from cyc import a" in found[1].splitlines()


def test_importing_a_module_runs_its_package() -> None:
    graph = grimp.ImportGraph()
    # p/__init__ re-exports p.x, which imports a module outside p that imports p.y.
    graph.add_import(importer="r.p", imported="r.p.x", line_number=1, line_contents="a")
    graph.add_import(importer="r.p.x", imported="r.q", line_number=1, line_contents="b")
    graph.add_import(importer="r.q", imported="r.p.y", line_number=1, line_contents="c")
    (found,) = problems(graph, allowed=())
    assert found.splitlines() == [
        "import cycle among r.p, r.p.x, r.q:",
        "  r.p -> r.p.x: line 1: a",
        "  r.p.x -> r.q: line 1: b",
        "  r.q -> r.p (importing r.p.y runs r.p): line 1: c",
    ]


def test_a_module_importing_a_sibling_does_not_run_its_package_again() -> None:
    graph = grimp.ImportGraph()
    graph.add_import(importer="r.p", imported="r.p.x", line_number=1, line_contents="a")
    graph.add_import(importer="r.p.x", imported="r.p.y", line_number=1, line_contents="b")
    graph.add_import(importer="r.p.y", imported="r.q", line_number=1, line_contents="c")
    assert problems(graph, allowed=()) == []


def test_an_allowed_import_must_close_a_cycle() -> None:
    graph = grimp.ImportGraph()
    graph.add_import(importer="r.a", imported="r.b", line_number=1, line_contents="a")
    graph.add_import(importer="r.b", imported="r.a", line_number=1, line_contents="b")
    graph.add_import(importer="r.b", imported="r.c", line_number=1, line_contents="c")
    assert problems(graph, allowed={("r.b", "r.a")}) == []
    assert problems(graph, allowed={("r.b", "r.a"), ("r.b", "r.c")}) == [
        "allowed import r.b -> r.c closes no cycle any more: remove it from ALLOWED"
    ]


if __name__ == "__main__":
    found = problems(grimp.build_graph(ROOT, cache_dir=None))
    print("\n".join(found) if found else f"no import cycles in {ROOT}")
    sys.exit(1 if found else 0)
