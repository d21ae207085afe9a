"""How the dashboard is reached: the hosts it answers to, its public URL, the proxies it trusts.

A browser lets a page of any site send requests to any address, the
dashboard's included, when that site's name is made to resolve to it (DNS
rebinding): the request then carries `Host: evil.example`, and everything
else (the cookie the dashboard hands out, the `Origin` that matches its
`Host`) looks right. So the dashboard answers only to the names it is known
by (`Reach.allows`); any other `Host` gets 400 before anything else happens,
with no session and no CSRF token:

* the loopback names (`localhost`, `127.0.0.1` and the rest of 127.0.0.0/8,
  `[::1]`), with any port;
* the `--host` address, unless it is a wildcard (`0.0.0.0`, `::`);
* the host of `--public-url`;
* every `--allowed-host` (`*`: any, which turns the check off).

Behind a reverse proxy, `--public-url` (`https://ops.example.com`) is the
address browsers use: the `Origin` of a browser's POST is compared with it
(and with the request's own scheme and `Host`, for a browser that reaches the
dashboard directly), and the session cookie is `Secure` when it is https.
Without it, a proxy's `X-Forwarded-Proto` and `X-Forwarded-For` are believed
from the addresses of `--forwarded-allow-ips` only (uvicorn's
`ProxyHeadersMiddleware`): the scheme they give makes the cookie `Secure` and
the `Origin` compared with it, the client's address they give is the one
failed logins are counted against (`throttle`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, final
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse

from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HostCheck", "Reach", "host_of", "is_loopback", "origin_of"]

_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`): only this machine can connect."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _authority(header: str) -> tuple[str, int | None] | None:
    """(host, port) of `name`, `name:port` or `[v6]:port`, the host lower-cased; None if malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket:
            return None
    else:
        name, colon, port = header.partition(":")
        rest = colon + port
    if not rest:
        return (name, None) if name else None
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()) or len(digits) > 5:
        return None
    return (name, int(digits)) if name else None


def host_of(header: str) -> str | None:
    """The host of a `Host` header (`name`, `name:port`, `[v6]:port`), lower-cased; None if malformed."""
    found = _authority(header)
    return None if found is None else found[0]


def origin_of(scheme: str, authority: str) -> str | None:
    """`scheme://host[:port]` as browsers write an `Origin`: lower-case, no default port; None if malformed."""
    scheme = scheme.lower()
    found = _authority(authority)
    if found is None or scheme not in _DEFAULT_PORTS:
        return None
    name, port = found
    shown = f"[{name}]" if ":" in name else name
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """The names the dashboard answers to, its public origin, and the proxies it believes."""

    #: Host names allowed besides the loopback names (lower-case, without port).
    hosts: frozenset[str] = frozenset()
    #: Whether every Host is allowed (`--allowed-host '*'`).
    any_host: bool = False
    #: The public URL's origin (`https://ops.example.com`), or None.
    public_origin: str | None = None
    #: The addresses whose X-Forwarded-* headers are believed (uvicorn's syntax).
    forwarded_allow_ips: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        host: str | None = None,
        public_url: str | None = None,
        allowed_hosts: Sequence[str] = (),
        forwarded_allow_ips: Sequence[str] = (),
    ) -> Reach:
        """The reach of a dashboard listening on `host`, known as `public_url` and `allowed_hosts`.

        Raises:
            ConfigError: `public_url` is not an http(s) URL of a host (without a
                path, a query or credentials), an allowed host is malformed, or a
                forwarded address is not an IP address or network (nor `*`).
        """
        names: set[str] = set()
        any_host = False
        for given in allowed_hosts:
            if given.strip() == "*":
                any_host = True
                continue
            name = host_of(f"[{given}]" if _bare_v6(given) else given)
            if name is None or any(c.isspace() or c in "/@?#" for c in name):
                raise ConfigError("allowed_host", f"{given!r} is not a host name or address")
            names.add(name)
        if host is not None and host.strip().lower() not in _WILDCARDS:
            listened = host_of(host if not _bare_v6(host) else f"[{host}]")
            if listened is not None:
                names.add(listened)
        origin = None
        if public_url is not None:
            origin = _public_origin(public_url)
            public_host = host_of(urlsplit(public_url.strip()).netloc)
            assert public_host is not None  # _public_origin checked it
            names.add(public_host)
        for address in forwarded_allow_ips:
            _check_address(address)
        return cls(
            hosts=frozenset(names),
            any_host=any_host,
            public_origin=origin,
            forwarded_allow_ips=tuple(a.strip() for a in forwarded_allow_ips),
        )

    def allows(self, header: str) -> bool:
        """Whether a request with this `Host` header is answered."""
        if self.any_host:
            return True
        name = host_of(header)
        return name is not None and (is_loopback(name) or name in self.hosts)

    def same_origin(self, origin: str, *, scheme: str, host: str) -> bool:
        """Whether a browser's `Origin` is this dashboard: its public URL's, or the request's own."""
        sent = origin_of(*_split_origin(origin))
        if sent is None:  # "null" (a sandboxed frame, a file), or not an origin at all
            return False
        return sent in (self.public_origin, origin_of(scheme, host))

    def secure(self, scheme: str) -> bool:
        """Whether the session cookie is `Secure`: the public URL or the request is https."""
        public = self.public_origin is not None and self.public_origin.startswith("https:")
        return public or scheme == "https"


def _bare_v6(host: str) -> bool:
    return host.count(":") > 1 and not host.startswith("[")


def _split_origin(origin: str) -> tuple[str, str]:
    scheme, sep, rest = origin.partition("://")
    return (scheme, rest) if sep and "/" not in rest else ("", "")


def _public_origin(url: str) -> str:
    """The origin of `--public-url`, checked."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - reading it checks it
    except ValueError:
        raise ConfigError("public_url", f"{url!r} is not a URL") from None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(
            "public_url", f"{url!r} is not an http(s) URL such as https://ops.example.com"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ConfigError("public_url", f"{url!r} holds credentials, a query or a fragment")
    if parts.path not in ("", "/"):
        raise ConfigError(
            "public_url",
            f"{url!r}: the dashboard is served at the root of its host, not under a path",
        )
    origin = origin_of(parts.scheme, parts.netloc)
    if origin is None:
        raise ConfigError("public_url", f"{url!r} names no host")
    return origin


def _check_address(address: str) -> None:
    text = address.strip()
    if text == "*":
        return
    try:
        ipaddress.ip_network(text)
    except ValueError:
        raise ConfigError(
            "forwarded_allow_ips", f"{address!r} is not an IP address or network (nor '*')"
        ) from None


@final
class HostCheck:
    """Answers 400 to a request whose `Host` the dashboard is not known by (`Reach.allows`).

    It runs before everything else, so a refused request gets no session
    cookie, no CSRF token, and reaches no page.
    """

    def __init__(self, app: ASGIApp, reach: Reach) -> None:
        self.app = app
        self.reach = reach

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
            if not self.reach.allows(host):
                shown = host[:80] if host else "(none)"
                response = PlainTextResponse(
                    f"400: this dashboard does not answer to the host {shown!r}: "
                    "browse it by a name it knows, or add that name with --allowed-host\n",
                    status_code=400,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
