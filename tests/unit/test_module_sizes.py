"""Small files: no module of the package over 500 lines, and the App and the agent worker at most 400.

The App registers and runs (the operator's actions are `operations`, the
roles' assembly `assembly`); the agent worker only executes what
`core.handling` decides. A module that grows past its bound is split by
concept, not given a larger bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "shepherd"
MOST = 500
#: Modules held to a tighter bound.
TIGHTER = {"app.py": 400, "agents/worker.py": 400}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_500_lines() -> None:
    over = {
        str(path.relative_to(SRC)): n for path in SRC.rglob("*.py") if (n := _lines(path)) > MOST
    }
    assert over == {}


@pytest.mark.parametrize(("module", "bound"), sorted(TIGHTER.items()))
def test_the_app_and_the_agent_worker_stay_small(module: str, bound: int) -> None:
    assert _lines(SRC / module) <= bound
