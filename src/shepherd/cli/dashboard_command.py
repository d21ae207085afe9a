"""`shepherd dashboard`: the web dashboard over the store (needs the `shepherd[dashboard]` extra).

Like the operator's commands, `--app` only supplies the store and the
settings: the dashboard runs no workflow. It listens on 127.0.0.1:8080 by
default; on any other address it refuses to start without a token.
"""

from __future__ import annotations

import contextlib
import sys

import click

from shepherd.cli.loader import run_with
from shepherd.cli.options import Command, app_option, open_for, store_option
from shepherd.errors import ShepherdError

__all__ = ["COMMANDS", "dashboard"]


@click.command(cls=Command)
@app_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Any but a loopback address needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8080,
    show_default=True,
    help="Port to listen on (0: any free port, named in the ready line).",
)
@click.option(
    "--token",
    envvar="SHEPHERD_DASHBOARD_TOKEN",
    metavar="TOKEN",
    help="The shared token every page and action then requires (named operator "
    "tokens from `shepherd tokens add` open it too) [env SHEPHERD_DASHBOARD_TOKEN].",
)
@store_option
def dashboard(
    app_spec: str | None, host: str, port: int, token: str | None, store: str | None
) -> None:
    """Serve the web dashboard: overview, task list, task pages and actions.

    Without a token (loopback only), anyone who can connect acts as the
    operator `local`. With --token, a login form takes the shared token or a
    named operator's token; scripts send `Authorization: Bearer TOKEN`.
    Once it listens, a line `shepherd ready: dashboard=URL` is printed.
    Ctrl-C or SIGTERM stops it.
    """
    try:
        from shepherd.dashboard import check_exposure, serve
    except ImportError as exc:
        raise ShepherdError(
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): "
            "pip install 'shepherd[dashboard]'"
        ) from None
    check_exposure(host, token)
    app = open_for(app_spec, store, existing=True)

    def ready(url: str) -> None:
        mode = "token required" if token else "no token: anyone on this machine acts as 'local'"
        click.echo(f"shepherd ready: dashboard={url} ({mode})")
        sys.stdout.flush()

    async def work() -> None:
        await app.open()  # a store that cannot be opened fails here, with its exit code
        await serve(app, host=host, port=port, token=token, ready=ready)

    with contextlib.suppress(KeyboardInterrupt):
        run_with(app, work)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (dashboard,)
