"""The dashboard's sessions, CSRF tokens and the loopback rule: pure, without a server."""

from __future__ import annotations

import pytest

from shepherd.dashboard.access import local_path
from shepherd.dashboard.auth import SESSION_SECONDS, Sessions
from shepherd.dashboard.server import check_exposure, is_loopback
from shepherd.errors import ConfigError


class Clock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_cookie_carries_a_signed_name_and_no_secret() -> None:
    sessions = Sessions(key=b"k" * 32)
    cookie, session = sessions.issue("anna")
    assert sessions.read(cookie) == session
    assert session.operator == "anna"
    issued, nonce, name, _signature = cookie.split(".")
    assert (issued, nonce) == (str(session.issued), session.nonce)
    assert name == "YW5uYQ"  # base64url of the name: readable, but not forgeable


@pytest.mark.parametrize(
    "forge",
    [
        lambda c: c.replace("YW5uYQ", "YmVu"),  # another name ("ben") under anna's signature
        lambda c: c[:-2] + ("AA" if not c.endswith("AA") else "BB"),
        lambda c: c + ".x",
        lambda c: "",
        lambda c: "....",
        lambda c: c.split(".", 1)[1],
    ],
)
def test_a_forged_or_broken_cookie_opens_nothing(forge: object) -> None:
    sessions = Sessions(key=b"k" * 32)
    cookie, _ = sessions.issue("anna")
    assert callable(forge)
    assert sessions.read(forge(cookie)) is None


def test_a_cookie_signed_under_another_key_opens_nothing() -> None:
    cookie, _ = Sessions(key=b"a" * 32).issue("anna")
    assert Sessions(key=b"b" * 32).read(cookie) is None
    # Without a key given, each dashboard draws its own: a restart ends every session.
    assert Sessions().read(Sessions().issue("anna")[0]) is None


def test_a_session_expires() -> None:
    clock = Clock()
    sessions = Sessions(key=b"k" * 32, now=clock)
    cookie, _ = sessions.issue("anna")
    clock.now += SESSION_SECONDS - 1
    assert sessions.read(cookie) is not None
    clock.now += 1
    assert sessions.read(cookie) is None


def test_each_session_has_its_own_csrf_token() -> None:
    sessions = Sessions(key=b"k" * 32)
    _, first = sessions.issue("anna")
    _, second = sessions.issue("anna")
    assert sessions.csrf(first) != sessions.csrf(second)
    assert sessions.csrf(first) == sessions.csrf(first)
    assert sessions.csrf(first) != Sessions(key=b"x" * 32).csrf(first)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost"])
def test_loopback_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    check_exposure(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "dashboard.example.com"])
def test_any_other_address_needs_a_token(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigError, match="give it a token") as raised:
        check_exposure(host, None)
    assert raised.value.field == "host"
    check_exposure(host, "a-token-of-16-chars")


def test_a_blank_token_is_refused() -> None:
    with pytest.raises(ConfigError, match="token is empty"):
        check_exposure("127.0.0.1", "  ")


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/tasks?state=error", "/tasks?state=error"),
        ("/", "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("tasks", "/"),
        ("/x\r\nSet-Cookie: a=b", "/"),
    ],
)
def test_redirects_stay_on_the_dashboard(given: str, kept: str) -> None:
    assert local_path(given) == kept
