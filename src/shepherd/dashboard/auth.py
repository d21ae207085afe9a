"""Who is asking: the signed session cookie, a Bearer token, or the open loopback mode.

A session is `issued.nonce.name.signature`: the operator's name and a random
nonce, signed with HMAC-SHA256 under a key drawn at random when the dashboard
starts. The cookie never holds a token, only a name the server signed; a
restart (a new key) ends every session. A session lasts `SESSION_SECONDS`,
and a named operator removed with `shepherd tokens remove` loses theirs
within `OPERATORS_TTL` seconds (the list of operators is read again then).

With a token configured, a request is let in by a valid session cookie, or by
`Authorization: Bearer TOKEN` (the shared token, or an operator's token:
`Operations.authenticate`). Without a token (loopback only), everyone is the operator
`local`, and gets a session all the same: its nonce keys the CSRF token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from shepherd.dashboard.throttle import LoginThrottle
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from starlette.requests import Request

    from shepherd.operations import Operations

__all__ = [
    "COOKIE",
    "LOCAL",
    "MAX_TOKEN_CHARS",
    "MIN_TOKEN_CHARS",
    "SHARED",
    "Guard",
    "Identity",
    "Session",
    "Sessions",
    "check_token_length",
]

#: The session cookie's name.
COOKIE = "shepherd_session"
#: Who acts when no token is configured (the dashboard listens on loopback only).
LOCAL = "local"
#: Who acts with the shared `--token` (named operator tokens record their own names).
SHARED = "shared-token"
#: How long a session cookie is honoured.
SESSION_SECONDS = 12 * 3600
#: How long the list of named operators is trusted before it is read again.
OPERATORS_TTL = 5.0
#: The fewest characters of the shared token (named operators' tokens have 43).
MIN_TOKEN_CHARS = 16
#: Longer texts are no token: refused without looking further.
MAX_TOKEN_CHARS = 200


def check_token_length(token: str | None) -> None:
    """Refuse a shared token that is blank, shorter than MIN_TOKEN_CHARS, or longer than MAX_TOKEN_CHARS.

    A short token is guessed: even slowed to a few attempts a minute
    (`throttle`), a guesser has all the time it wants.

    Raises:
        ConfigError: The token is such (field `token`); its text is never shown.
    """
    if token is None:
        return
    if not token.strip():
        raise ConfigError("token", "the dashboard token is empty")
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            "token",
            f"the dashboard token has {len(token)} characters: it needs at least "
            f"{MIN_TOKEN_CHARS} (make one with: openssl rand -base64 32)",
        )
    if len(token) > MAX_TOKEN_CHARS:
        raise ConfigError(
            "token", f"the dashboard token is longer than {MAX_TOKEN_CHARS} characters"
        )


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """A signed-in browser: who, and the nonce its CSRF token is derived from."""

    operator: str
    nonce: str
    issued: int


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """Who makes a request: `session` for a browser, None for a Bearer script.

    `cookie` is a new session cookie to set on the response (the open mode's
    first visit), else None.
    """

    operator: str
    session: Session | None
    cookie: str | None = None


@final
class Sessions:
    """Issues and checks session cookies and CSRF tokens under one random key."""

    def __init__(self, *, key: bytes | None = None, now: Callable[[], float] = time.time) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self._now = now

    def issue(self, operator: str) -> tuple[str, Session]:
        """A new session for `operator`: the cookie's value, and the session it carries."""
        session = Session(
            operator=operator, nonce=secrets.token_urlsafe(18), issued=int(self._now())
        )
        name = base64.urlsafe_b64encode(operator.encode()).decode().rstrip("=")
        body = f"{session.issued}.{session.nonce}.{name}"
        return f"{body}.{self._sign('session', body)}", session

    def read(self, cookie: str | None) -> Session | None:
        """The session a cookie carries, or None if it is missing, forged or expired."""
        if not cookie or cookie.count(".") != 3:
            return None
        body, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature, self._sign("session", body)):
            return None
        issued, nonce, name = body.split(".")
        try:
            operator = base64.urlsafe_b64decode(name + "=" * (-len(name) % 4)).decode()
            started = int(issued)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return None
        if not 0 <= self._now() - started < SESSION_SECONDS:
            return None
        return Session(operator=operator, nonce=nonce, issued=started)

    def csrf(self, session: Session) -> str:
        """The CSRF token of a session: its forms carry it, its POSTs must send it back."""
        return self._sign("csrf", session.nonce)

    def _sign(self, purpose: str, text: str) -> str:
        digest = hmac.new(self._key, f"{purpose}:{text}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


@final
class Guard:
    """Decides who a request comes from, if anyone (see the module's docstring).

    It holds the dashboard's `operations` (`App.operations`), what every page
    reads and does, and the `throttle` of failed token checks.
    """

    def __init__(
        self,
        operations: Operations,
        *,
        token: str | None,
        sessions: Sessions | None = None,
        throttle: LoginThrottle | None = None,
    ) -> None:
        check_token_length(token)
        self.operations = operations
        self.token = token
        self.sessions = sessions if sessions is not None else Sessions()
        self.throttle = throttle if throttle is not None else LoginThrottle()
        self._operators: frozenset[str] = frozenset()
        self._read_at = float("-inf")

    @property
    def open(self) -> bool:
        """Whether no token is configured (everyone on loopback is `local`)."""
        return self.token is None

    async def identify(self, request: Request) -> Identity | None:
        """Who sends `request`, or None when it must be refused."""
        header = request.headers.get("authorization")
        if header is not None and self.token is not None:
            scheme, _, given = header.partition(" ")
            if scheme.lower() != "bearer" or not given.strip():
                return None
            name = await self.check_token(given.strip())
            return None if name is None else Identity(operator=name, session=None)
        session = self.sessions.read(request.cookies.get(COOKIE))
        if session is not None and await self._still_valid(session):
            return Identity(operator=session.operator, session=session)
        if self.open:
            cookie, session = self.sessions.issue(LOCAL)
            return Identity(operator=LOCAL, session=session, cookie=cookie)
        return None

    async def check_token(self, token: str) -> str | None:
        """The operator a token names: SHARED for the shared token, a named operator's name, or None."""
        if self.token is not None and hmac.compare_digest(token.encode(), self.token.encode()):
            return SHARED
        return await self.operations.authenticate(token)

    async def _still_valid(self, session: Session) -> bool:
        if self.open:
            return session.operator == LOCAL
        if session.operator == SHARED:
            return True
        clock = time.monotonic()
        if clock - self._read_at > OPERATORS_TTL:
            self._operators = frozenset(o.name for o in await self.operations.operators())
            self._read_at = clock
        return session.operator in self._operators
