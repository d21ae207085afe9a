"""`shepherd dashboard`: the web dashboard over the store (needs the `shepherd[dashboard]` extra).

Like the operator's commands, `--app` only supplies the store and the
settings: the dashboard runs no workflow. It listens on 127.0.0.1:8080 by
default; on any other address, or behind a public URL, it refuses to start
without a token (of at least 16 characters).
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
@click.option(
    "--public-url",
    metavar="URL",
    help="The address browsers use, behind a reverse proxy (https://ops.example.com): "
    "forms must come from it, the session cookie is Secure when it is https, and its "
    "host is allowed. Needs a token.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another host name the dashboard answers to (repeatable; '*': any). By default: "
    "the loopback names, --host unless 0.0.0.0 or ::, and the --public-url's host.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="ADDRESSES",
    default="",
    help="Comma-separated addresses or networks of the proxies whose X-Forwarded-Proto "
    "and X-Forwarded-For are believed ('*': any). By default: none.",
)
@store_option
def dashboard(
    app_spec: str | None,
    host: str,
    port: int,
    token: str | None,
    public_url: str | None,
    allowed_hosts: tuple[str, ...],
    forwarded_allow_ips: str,
    store: str | None,
) -> None:
    """Serve the web dashboard: overview, task list, task pages and actions.

    Without a token (loopback only), anyone who can connect acts as the
    operator `local`. With --token, a login form takes the shared token or a
    named operator's token; scripts send `Authorization: Bearer TOKEN`.
    It answers only to the host names it knows (DNS rebinding): behind a
    reverse proxy give --public-url, and --forwarded-allow-ips to believe
    the proxy's X-Forwarded-* headers. Once it listens, a line
    `shepherd ready: dashboard=URL` is printed.
    Ctrl-C or SIGTERM stops it.
    """
    try:
        from shepherd.dashboard import Reach, check_exposure, serve
    except ImportError as exc:
        raise ShepherdError(
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): "
            "pip install 'shepherd[dashboard]'"
        ) from None
    forwarded = [a.strip() for a in forwarded_allow_ips.split(",") if a.strip()]
    check_exposure(host, token, public_url=public_url)
    Reach.of(  # checked before the store is opened
        host=host,
        public_url=public_url,
        allowed_hosts=allowed_hosts,
        forwarded_allow_ips=forwarded,
    )
    app = open_for(app_spec, store, existing=True)

    def ready(url: str) -> None:
        mode = "token required" if token else "no token: anyone on this machine acts as 'local'"
        click.echo(f"shepherd ready: dashboard={url} ({mode})")
        sys.stdout.flush()

    async def work() -> None:
        await app.open()  # a store that cannot be opened fails here, with its exit code
        await serve(
            app,
            host=host,
            port=port,
            token=token,
            ready=ready,
            public_url=public_url,
            allowed_hosts=allowed_hosts,
            forwarded_allow_ips=forwarded,
        )

    with contextlib.suppress(KeyboardInterrupt):
        run_with(app, work)


#: The commands of this module, for the `shepherd` group.
COMMANDS = (dashboard,)
