"""What a `shepherd ...` run under test printed: its output when it succeeded, its one-line error when not."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def ok(completed: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that must have succeeded."""
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def ok_json(completed: subprocess.CompletedProcess[str]) -> Any:
    """The JSON document a command printed with `--json`."""
    return json.loads(ok(completed))


def refused(completed: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one-line error of a command that failed with `code`."""
    assert completed.returncode == code, (completed.stdout, completed.stderr)
    (line,) = completed.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line
