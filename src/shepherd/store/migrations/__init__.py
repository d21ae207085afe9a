"""Versioned schema migrations, one folder per backend: NNNN_name.sql applied in order."""

from __future__ import annotations

from importlib import resources


def migrations(backend: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for every migration of `backend`, in order."""
    folder = resources.files(__package__).joinpath(backend)
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append((int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)
