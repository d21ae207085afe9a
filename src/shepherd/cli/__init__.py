"""The `shepherd` command line. `run_cli` is the one place errors become messages.

A ShepherdError or a usage error becomes one line on stderr, `error: <message>`,
and the exit code `exits.exit_code` gives it (2 usage or bad input, 3 unknown
task, 4 the task ended badly, 5 timeout, 6 store unavailable or damaged); no
traceback is shown for what the user can fix. With `--json`, stdout also gets
one JSON document: `{"error": {"type": ..., "message": ..., "exit_code": ...}}`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from shepherd.cli.exits import ExitCode, WaitTimeoutError, exit_code
from shepherd.errors import ShepherdError, TaskFailedError

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

    argv = list(sys.argv[1:] if args is None else args)
    as_json = "--json" in (argv[: argv.index("--")] if "--" in argv else argv)
    try:
        result = cli.main(args=argv, prog_name="shepherd", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        return ExitCode.USAGE
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        return _fail(exc, exc.format_message() + hint, as_json)
    except ShepherdError as exc:
        return _fail(exc, _message(exc), as_json)
    except (click.Abort, KeyboardInterrupt) as exc:
        return _fail(exc, "interrupted", as_json)
    except BrokenPipeError:
        # The reader went away (`shepherd tasks | head`): silence the final flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.FAILURE
    return result if isinstance(result, int) else ExitCode.OK


def _message(error: ShepherdError) -> str:
    if isinstance(error, TaskFailedError):  # its error may hold a whole traceback: one line
        from shepherd.cli.render import reason

        return f"task {error.task_id} ended {error.state}: {reason(error.error)}"
    return error.message


def _fail(error: BaseException, message: str, as_json: bool) -> int:
    code = exit_code(error)
    line = " ".join(message.split())
    if as_json:
        click.echo(json.dumps({"error": _document(error, line, code)}, indent=2, default=str))
    click.echo(f"error: {line}", err=True)
    return code


def _document(error: BaseException, message: str, code: ExitCode) -> dict[str, object]:
    """The `{"error": ...}` object of a failure: what, why, the exit code, and the task."""
    document: dict[str, object] = {
        "type": type(error).__name__,
        "message": message,
        "exit_code": int(code),
    }
    if isinstance(error, TaskFailedError):
        document.update(task_id=error.task_id, process_state=error.state, task_error=error.error)
    elif isinstance(error, WaitTimeoutError):
        document.update(task_id=error.task_id, workers_alive=error.alive)
    elif isinstance(getattr(error, "task_id", None), str):
        document["task_id"] = getattr(error, "task_id")  # noqa: B009 - any error naming one
    return document
