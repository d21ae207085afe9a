"""The `shepherd` command line. `run_cli` runs one; errors become messages in `shepherd.console`.

A ShepherdError or a usage error becomes one line on stderr, `error: <message>`,
and the exit code `ExitCode` gives it (2 usage or bad input, 3 unknown task,
4 the task ended badly, 5 timeout, 6 store unavailable or damaged); no
traceback is shown for what the user can fix. With `--json`, stdout also gets
one JSON document: `{"error": {"type": ..., "message": ..., "exit_code": ...}}`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

from shepherd.console import ExitCode, run

__all__ = ["ExitCode", "main", "run_cli"]


def main(args: Sequence[str] | None = None) -> NoReturn:
    """The `shepherd` console script: run the command, exit with its code."""
    sys.exit(run_cli(args))


def run_cli(args: Sequence[str] | None = None) -> int:
    """Run one `shepherd` command line and return its exit code.

    Args:
        args: The arguments after the program name; `sys.argv[1:]` when None.

    Returns:
        An `ExitCode` (0 on success; a failure is reported on stderr, and on
        stdout as JSON with `--json`), or the code a delegated command returned.
    """
    from shepherd.cli.commands import cli

    return run(cli, args, prog_name="shepherd")
