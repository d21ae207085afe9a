"""The options every command shares, spelled once: `--app`, `--store`, `--json`, durations.

The convention: the app is always `--app MODULE:ATTR` (env SHEPHERD_APP),
never an argument; the store is `--store URL` (env SHEPHERD_STORE); both go
on the command or before it (`shepherd --app shop:app --store URL tasks`). `Command` turns an
argument that looks like `MODULE:ATTR` where none is expected into a usage
error that says to pass it as `--app`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from click.core import ParameterSource

from shepherd.cli.loader import open_app
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.app import App
    from shepherd.operations import Operations

__all__ = [
    "APP_REQUIRED",
    "Command",
    "app_option",
    "duration_option",
    "instant_option",
    "json_option",
    "looks_like_app",
    "open_for",
    "operations_for",
    "require_app",
    "states_option",
    "store_option",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The usage error of a command that runs an app's code without one.
APP_REQUIRED = "--app MODULE:ATTR is required (or set SHEPHERD_APP)"
_APP_HINT = "pass the app as --app MODULE:ATTR"
_APP_LIKE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
_STATES = ", ".join(state.value for state in ProcessState)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def looks_like_app(text: str) -> bool:
    """Whether `text` has the shape of an app spec, `module:attr`."""
    return _APP_LIKE.fullmatch(text) is not None


class Command(click.Command):
    """A command whose extra arguments are a usage error with a hint when one is an app.

    `shepherd tasks shop:app` (the old form) says to pass the app as `--app`.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse as click does, then refuse extra arguments, naming the app option."""
        ctx.allow_extra_args = True
        rest = super().parse_args(ctx, args)
        extra = ctx.args
        if extra:
            given = [
                v for p in self.params if isinstance(p, click.Argument) for v in _texts(ctx, p)
            ]
            s = "" if len(extra) == 1 else "s"
            message = f"Got unexpected extra argument{s} ({' '.join(extra)})"
            spec = next((t for t in (*extra, *given) if looks_like_app(t)), None)
            if spec is not None:
                message += f": {_APP_HINT} (--app {spec})"
            raise click.UsageError(message, ctx)
        return rest


def _texts(ctx: click.Context, param: click.Argument) -> list[str]:
    value = ctx.params.get(param.name or "")
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple | list):
        return [v for v in value if isinstance(v, str)]
    return []


def app_option(fn: F) -> F:
    """`--app MODULE:ATTR` (env SHEPHERD_APP): the app; the command checks whether it needs one.

    Given before the command (`shepherd --app shop:app tasks`) it counts too:
    the command's own `--app` first, then the group's, then SHEPHERD_APP.
    """
    return click.option(
        "--app",
        "app_spec",
        metavar="MODULE:ATTR",
        envvar="SHEPHERD_APP",
        callback=_group_app,
        help="The App: module:attr (or module, for module:app), imported from the "
        "current directory [env SHEPHERD_APP].",
    )(fn)


def _group_app(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The command's `--app`; else the one given before the command; else SHEPHERD_APP's."""
    if ctx.get_parameter_source(param.name or "") is ParameterSource.COMMANDLINE:
        return value
    root = ctx.find_root()
    if root is not ctx and root.get_parameter_source("app_spec") is ParameterSource.COMMANDLINE:
        return cast("str", root.params["app_spec"])
    return value


def store_option(fn: F) -> F:
    """`--store URL`: the state store, overriding the group's, the env's and the app's."""
    return click.option(
        "--store",
        metavar="URL",
        default=None,
        help="State store URL, e.g. sqlite:///shepherd.db or postgresql://host/db "
        "(overrides the app's) [env SHEPHERD_STORE].",
    )(fn)


def json_option(fn: F) -> F:
    """`--json`: print one JSON document for scripts, on failure too."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help='Print JSON for scripts (on failure: an {"error": ...} document).',
    )(fn)


def limit_option(fn: F) -> F:
    """`--limit N`: list at most N rows (100 by default)."""
    return click.option(
        "--limit",
        type=click.IntRange(min=1),
        default=100,
        show_default=True,
        help="List at most this many.",
    )(fn)


def require_app(spec: str | None) -> str:
    """The app spec of a command that runs the app's code, or a usage error."""
    if spec is None:
        raise click.UsageError(APP_REQUIRED, click.get_current_context())
    return spec


def open_for(spec: str | None, store: str | None, *, existing: bool = False) -> App:
    """The App of a command: its `--app`, on its `--store`, else the group's `--store`."""
    group_store = cast("str | None", click.get_current_context().find_root().obj)
    return open_app(spec, store or group_store, existing=existing)


def operations_for(spec: str | None, store: str | None, *, existing: bool = False) -> Operations:
    """The operator's side (`App.operations`) of the App `open_for` finds: all an operator command uses."""
    return open_for(spec, store, existing=existing).operations


def states_option(
    _ctx: click.Context, _param: click.Parameter, values: Sequence[str]
) -> tuple[ProcessState, ...]:
    """Repeated or comma-separated `--state` values -> process states."""
    states: list[ProcessState] = []
    for name in (part.strip() for value in values for part in value.split(",")):
        try:
            states.append(ProcessState(name.lower()))
        except ValueError:
            raise click.BadParameter(f"unknown state {name!r} (choose from {_STATES})") from None
    return tuple(states)


#: The help of `--state`.
STATES_HELP = f"Only tasks in this state (repeat, or comma-separate): {_STATES}."


def duration_option(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> timedelta | None:
    """`30s`, `15m`, `1h`, `2d` (a bare number is seconds) -> a timedelta; None stays None."""
    if value is None:
        return None
    found = _DURATION.fullmatch(value.strip().lower())
    if found is None:
        raise click.BadParameter(
            f"{value!r} is not a duration: a number with s, m, h or d (30s, 15m, 1h, 2d)"
        )
    try:
        return timedelta(seconds=float(found[1]) * _UNITS[found[2]])
    except OverflowError:
        raise click.BadParameter(f"{value!r} is too long a duration") from None


def instant_option(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> datetime | None:
    """An ISO 8601 instant with its time zone (`2030-01-31T09:00Z`, `...+02:00`); None stays None."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time: 2030-01-31T09:00Z or 2030-01-31T09:00+02:00"
        ) from None
    if at.utcoffset() is None:
        raise click.BadParameter(
            f"{value!r} has no time zone: add Z (UTC) or an offset such as +02:00"
        )
    return at
