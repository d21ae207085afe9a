"""The import contracts name every module of the package: a new one cannot slip past them."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import shepherd

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _contract(name_start: str) -> dict[str, Any]:
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    (found,) = [c for c in contracts if c["name"].startswith(name_start)]
    return dict(found)


def _top_level() -> set[str]:
    return {f"shepherd.{m.name}" for m in pkgutil.iter_modules(shepherd.__path__)}


def test_every_top_level_module_has_a_layer() -> None:
    layers = _contract("layers:")["layers"]
    named = [m.strip() for layer in layers for m in layer.replace("|", ":").split(":")]
    assert len(named) == len(set(named))
    assert set(named) == _top_level()


def test_the_core_may_import_no_other_top_level_module() -> None:
    forbidden = set(_contract("the core is pure")["forbidden_modules"])
    assert forbidden == _top_level() - {"shepherd.core"}


def test_everything_above_the_store_keeps_off_the_backends() -> None:
    layers = _contract("layers:")["layers"]
    above = layers[: layers.index("shepherd.store")]
    named = {m.strip() for layer in above for m in layer.replace("|", ":").split(":")}
    assert set(_contract("roles use the store contract")["source_modules"]) == named
