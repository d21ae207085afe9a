"""Running one command line: `run` is the one place errors become messages.

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

from shepherd.console.exits import ExitCode, WaitTimeoutError, exit_code
from shepherd.core.records import JsonValue
from shepherd.errors import ShepherdError, TaskFailedError

__all__ = ["HELP_OPTIONS", "main", "reason", "run"]

#: The help options of every command.
HELP_OPTIONS = ["-h", "--help"]


def main(command: click.Command, args: Sequence[str] | None, *, prog_name: str) -> NoReturn:
    """Run `command` (`run`) and exit with its code."""
    sys.exit(run(command, args, prog_name=prog_name))


def run(command: click.Command, args: Sequence[str] | None, *, prog_name: str) -> int:
    """Run one command line of `command` and return its exit code.

    Args:
        command: The click command (or group) to run.
        args: The arguments after the program name; `sys.argv[1:]` when None.
        prog_name: The program's name in usage lines and hints (`shepherd`).

    Returns:
        An `ExitCode` (0 on success; a failure is reported on stderr, and on
        stdout as JSON with `--json`), or the code a delegated command returned.
    """
    argv = list(sys.argv[1:] if args is None else args)
    as_json = "--json" in (argv[: argv.index("--")] if "--" in argv else argv)
    try:
        result = command.main(
            args=argv, prog_name=prog_name, standalone_mode=False, help_option_names=HELP_OPTIONS
        )
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


def reason(error: JsonValue) -> str:
    """The human reason of a task's or step's error value, on one line."""
    if error is None:
        return ""
    if isinstance(error, dict):
        if "reason" in error:
            return " ".join(str(error["reason"]).split())
        if "message" in error:
            message = " ".join(str(error["message"]).split())
            kind = error.get("type")
            # A bug's message alone (KeyError: 'name' -> 'name') says too little.
            if isinstance(kind, str) and (error.get("bug") is True or not message):
                return f"{kind}: {message}".rstrip(": ")
            return message
    if isinstance(error, str):
        return " ".join(error.split())
    return json.dumps(error, ensure_ascii=False)


def _message(error: ShepherdError) -> str:
    if isinstance(error, TaskFailedError):  # its error may hold a whole traceback: one line
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
