"""Logging of the long-running commands: `--log-level`, `--log-level-for`, `--log-format`.

shepherd's own loggers (`shepherd`, `shepherd.tasks`, `shepherd.agent`, ...)
log at `--log-level`; every other logger (httpx, psycopg, uvicorn, ...) at
WARNING, or at `--log-level` if that is higher, so that a library's
per-request INFO lines do not drown the roles' own. `--log-level-for` sets one
logger (and those under it) to its own level: `--log-level-for httpx=info`.
`--log-format json` (env SHEPHERD_LOG_FORMAT) writes one JSON object per line
instead of `time LEVEL logger: message` (`shepherd.console.jsonlog`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any, TypeVar

import click

from shepherd.console.jsonlog import JsonFormatter
from shepherd.errors import ConfigError

__all__ = ["FORMATS", "LEVELS", "configure_logging", "log_options", "parse_level_for"]

F = TypeVar("F", bound=Callable[..., Any])

#: The level names the options accept (any case), mildest first.
LEVELS = ("debug", "info", "warning", "error", "critical")
#: The line formats `--log-format` accepts: `time LEVEL logger: message`, or JSON.
FORMATS = ("text", "json")
#: The least severe level a logger outside `shepherd` logs at unless told otherwise.
THIRD_PARTY_LEVEL = logging.WARNING
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Handler(logging.StreamHandler[IO[str]]):
    """The handler `configure_logging` installs (and replaces when called again)."""


def parse_level_for(text: str) -> tuple[str, str]:
    """`httpx=info` -> ("httpx", "info").

    Raises:
        ConfigError: No `=`, no logger name, or an unknown level.
    """
    name, sep, level = text.partition("=")
    name, level = name.strip(), level.strip().lower()
    if not sep or not name:
        raise ConfigError("log_level_for", f"{text!r} is not NAME=LEVEL (e.g. httpx=info)")
    return name, _level_name(level, f"log_level_for {name}")


def configure_logging(
    level: str,
    overrides: Sequence[tuple[str, str]] = (),
    *,
    stream: IO[str] | None = None,
    log_format: str = "text",
) -> None:
    """Send log records to `stream` (stderr), shepherd's at `level`, others at WARNING.

    Calling it again replaces what the previous call set up; handlers installed
    by anyone else are left alone.

    Args:
        level: The level of the `shepherd` loggers (`debug` ... `critical`).
        overrides: (logger name, level) pairs applied last, e.g. ("httpx", "info").
        stream: Where the lines go; stderr when None.
        log_format: `text` (`time LEVEL logger: message`) or `json` (one object a line).

    Raises:
        ConfigError: An unknown level or format name.
    """
    if log_format not in FORMATS:
        raise ConfigError(
            "log_format", f"unknown log format {log_format!r} (choose from {', '.join(FORMATS)})"
        )
    own = logging.getLevelName(_level_name(level, "log_level").upper())
    named = [(name, _level_name(value, f"log_level_for {name}")) for name, value in overrides]
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(handler)
    handler = _Handler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(_FORMAT))
    root.addHandler(handler)
    root.setLevel(max(THIRD_PARTY_LEVEL, own))
    logging.getLogger("shepherd").setLevel(own)
    for name, value in named:
        logging.getLogger(name).setLevel(value.upper())


def _level_name(value: str, field: str) -> str:
    name = value.strip().lower()
    if name not in LEVELS:
        raise ConfigError(field, f"unknown level {value!r} (choose from {', '.join(LEVELS)})")
    return name


def _level_for_option(
    _ctx: click.Context, _param: click.Parameter, values: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    try:
        return tuple(parse_level_for(value) for value in values)
    except ConfigError as exc:
        raise click.BadParameter(exc.message.split(": ", 1)[-1]) from None


def log_options(fn: F) -> F:
    """`--log-level LEVEL`, repeatable `--log-level-for NAME=LEVEL`, `--log-format FORMAT`.

    The command receives `log_level` (a level name), `log_level_for`
    ((name, level) pairs) and `log_format` (`text` or `json`), ready for
    `configure_logging`.
    """
    fn = click.option(
        "--log-format",
        "log_format",
        type=click.Choice(FORMATS, case_sensitive=False),
        default="text",
        show_default=True,
        envvar="SHEPHERD_LOG_FORMAT",
        help="text: 'time LEVEL logger: message'; json: one JSON object per line, with "
        "task_id, workflow, seq, agent, attempt and epoch on the lines about a task "
        "[env SHEPHERD_LOG_FORMAT].",
    )(fn)
    fn = click.option(
        "--log-level-for",
        "log_level_for",
        multiple=True,
        metavar="NAME=LEVEL",
        callback=_level_for_option,
        help="The level of one logger and those under it, e.g. httpx=info or "
        "shepherd.store=debug (repeatable). Loggers outside shepherd log at warning.",
    )(fn)
    return click.option(
        "--log-level",
        type=click.Choice(LEVELS, case_sensitive=False),
        default="info",
        show_default=True,
        help="Level of shepherd's own loggers (to stderr).",
    )(fn)
