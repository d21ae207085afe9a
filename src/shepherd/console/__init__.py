"""What shepherd's command lines share: exit codes, the one place errors become messages, logging.

`shepherd` (`shepherd.cli`), `python -m shepherd.bench` and `python -m
shepherd.demo` are run by `runner.run`: a ShepherdError or a usage error
becomes one line on stderr and the exit code of `exits`. The long-running
commands take the logging options of `logs` (`--log-format json`: `jsonlog`).
This package sits below the CLI, the demo and the bench, which all use it.
"""

from __future__ import annotations

from shepherd.console.exits import ExitCode
from shepherd.console.runner import main, run

__all__ = ["ExitCode", "main", "run"]
