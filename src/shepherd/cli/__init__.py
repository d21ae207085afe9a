"""The `shepherd` command line. `main` is the one place errors become messages.

A ShepherdError or a usage error becomes one line on stderr, `error: <message>`,
and exit code 2; no traceback is shown for what the user can fix.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import click

from shepherd.errors import ShepherdError

__all__ = ["main", "run_cli"]

#: Exit code for anything the user can fix: bad arguments, unknown names, bad state.
USER_ERROR = 2
#: Exit code after Ctrl-C outside the long-running commands, as shells expect.
INTERRUPTED = 130


def main(args: Sequence[str] | None = None) -> NoReturn:
    """The `shepherd` console script: run the command, exit with its code."""
    sys.exit(run_cli(args))


def run_cli(args: Sequence[str] | None = None) -> int:
    """Run one `shepherd` command line and return its exit code.

    Args:
        args: The arguments after the program name; `sys.argv[1:]` when None.

    Returns:
        0 on success, 2 for a user error (reported on stderr), 130 when
        interrupted, or the code a delegated command (demo, bench) returned.
    """
    from shepherd.cli.commands import cli

    try:
        result = cli.main(args=args, prog_name="shepherd", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        return USER_ERROR
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        return _fail(exc.format_message() + hint)
    except ShepherdError as exc:
        return _fail(exc.message)
    except (click.Abort, KeyboardInterrupt):
        click.echo("error: interrupted", err=True)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`shepherd tasks | head`): silence the final flush.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return result if isinstance(result, int) else 0


def _fail(message: str) -> int:
    click.echo(f"error: {' '.join(message.split())}", err=True)
    return USER_ERROR
