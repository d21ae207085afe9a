"""Running the dashboard: the loopback rule, the listening socket, uvicorn.

`check_exposure` is the rule of the `--host` option: on a loopback address
(127.0.0.0/8, ::1, `localhost`) a token is optional; on any other, or behind
a `--public-url`, the dashboard refuses to start without one; a token is at
least 16 characters. `serve` binds the socket itself (so a
port in use is a clear ConfigError before anything starts), prints one
readiness line naming the URL, and runs uvicorn until SIGINT or SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, final

import uvicorn

from shepherd.dashboard.auth import check_token_length
from shepherd.dashboard.reach import Reach, is_loopback
from shepherd.dashboard.site import create_dashboard
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from shepherd.app import App

__all__ = ["check_exposure", "is_loopback", "serve"]

#: Seconds uvicorn waits for open streams (the live pages) before it stops anyway.
GRACE = 1


def check_exposure(host: str, token: str | None, *, public_url: str | None = None) -> None:
    """Refuse to serve where others reach the dashboard without a token, or with a short one.

    Others reach it on a non-loopback `host`, and through the proxy a
    `public_url` names. A token is at least 16 characters (`check_token_length`).

    Raises:
        ConfigError: Such a `host` or a `public_url` and no token; a blank or short token.
    """
    check_token_length(token)
    if token is None and not is_loopback(host):
        raise ConfigError(
            "host",
            f"the dashboard would be reachable by others on {host}: give it a token "
            "(--token or SHEPHERD_DASHBOARD_TOKEN), or serve on 127.0.0.1",
        )
    if token is None and public_url is not None:
        raise ConfigError(
            "token",
            f"the dashboard would be reachable by others at {public_url}: give it a token "
            "(--token or SHEPHERD_DASHBOARD_TOKEN)",
        )


def url_of(host: str, port: int) -> str:
    """`http://host:port/` (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port.

    Raises:
        ConfigError: The address cannot be listened on (in use, not this machine's...).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(
            "host", f"cannot serve the dashboard on {host}: {exc.strerror or exc}"
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ConfigError("port", f"cannot serve the dashboard on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


@final
class _Server(uvicorn.Server):
    """uvicorn's server, announcing itself once it listens."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None]) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._ready()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGINT or SIGTERM, then return (uvicorn would raise the signal again).

        A signal is how the dashboard is meant to stop: the command then exits 0.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


async def serve(
    app: App,
    *,
    host: str,
    port: int,
    token: str | None,
    ready: Callable[[str], None],
    public_url: str | None = None,
    allowed_hosts: Sequence[str] = (),
    forwarded_allow_ips: Sequence[str] = (),
) -> None:
    """Serve the dashboard over `app` until SIGINT or SIGTERM; `ready(url)` once it listens.

    It answers to the loopback names, `host` (unless a wildcard), the host of
    `public_url` and `allowed_hosts`; it believes the forwarded headers of
    `forwarded_allow_ips` only (`reach`).

    Raises:
        ConfigError: A non-loopback host or a public URL without a token, a
            short token, a malformed URL, host or address, or the address
            cannot be listened on.
    """
    check_exposure(host, token, public_url=public_url)
    reach = Reach.of(
        host=host,
        public_url=public_url,
        allowed_hosts=allowed_hosts,
        forwarded_allow_ips=forwarded_allow_ips,
    )
    sock = listen(host, port)
    url = url_of(host, sock.getsockname()[1])
    config = uvicorn.Config(
        create_dashboard(app, token=token, reach=reach),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE,
        server_header=False,
        proxy_headers=False,
    )
    server = _Server(config, lambda: ready(url))
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
