"""`shepherd dashboard` run for real: the loopback rule, a port in use, a graceful stop."""

from __future__ import annotations

import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from e2e.conftest import CliProcess
from support.cli_checks import refused

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

Cli = Callable[..., subprocess.CompletedProcess[str]]
Start = Callable[..., AbstractContextManager[CliProcess]]


@pytest.fixture
def store(put_task: Callable[..., str]) -> str:
    """The test's SQLite store, holding one pending task (its id)."""
    return put_task()


def _get(url: str, headers: dict[str, str] | None = None) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object) -> None:
            return None

    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_it_refuses_an_address_others_reach_without_a_token(
    shepherd_cli: Cli, store: str, host: str
) -> None:
    result = shepherd_cli("dashboard", "--host", host, "--port", "0")
    message = refused(result, code=2)
    assert "give it a token (--token or SHEPHERD_DASHBOARD_TOKEN), or serve on 127.0.0.1" in message
    assert "shepherd ready" not in result.stdout


def test_a_port_in_use_is_a_usage_error(shepherd_cli: Cli, store: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = shepherd_cli("dashboard", "--port", str(port))
    message = refused(result, code=2)
    assert f"cannot serve the dashboard on 127.0.0.1:{port}: Address already in use" in message


def test_a_missing_store_is_exit_6(shepherd_cli: Cli) -> None:
    refused(shepherd_cli("dashboard", "--port", "0"), code=6)


def test_with_the_env_token_it_serves_everyone_who_has_it_and_stops_on_sigterm(
    shepherd_process: Start, cli_env: dict[str, str], store: str
) -> None:
    env = {**cli_env, "SHEPHERD_DASHBOARD_TOKEN": "s3cret-token-of-the-test"}
    with shepherd_process("dashboard", "--host", "0.0.0.0", "--port", "0", env=env) as served:
        assert "(token required)" in served.ready_line
        port = served.ready_line.split("dashboard=http://0.0.0.0:", 1)[1].split("/")[0]
        base = f"http://127.0.0.1:{port}"
        assert _get(base + "/tasks") == 303
        assert _get(base + "/tasks", {"Authorization": "Bearer nope"}) == 401
        assert (
            _get(base + f"/tasks/{store}", {"Authorization": "Bearer s3cret-token-of-the-test"})
            == 200
        )
        # A name it is not known by (DNS rebinding) gets 400, whatever the token.
        rebound = {
            "Host": f"evil.example:{port}",
            "Authorization": "Bearer s3cret-token-of-the-test",
        }
        assert _get(base + "/tasks", rebound) == 400
        assert served.terminate() == 0
    assert "s3cret-token-of-the-test" not in served.stderr()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--token", "short-token"], "the dashboard token has 11 characters: it needs at least 16"),
        (
            ["--public-url", "https://ops.example.com"],
            "reachable by others at https://ops.example.com",
        ),
        (
            ["--token", "a-token-long-enough", "--public-url", "ops.example.com"],
            "is not an http(s) URL such as https://ops.example.com",
        ),
        (
            ["--token", "a-token-long-enough", "--forwarded-allow-ips", "proxy"],
            "'proxy' is not an IP address or network",
        ),
    ],
)
def test_a_short_token_or_a_malformed_reach_is_a_usage_error(
    shepherd_cli: Cli, store: str, options: list[str], says: str
) -> None:
    result = shepherd_cli("dashboard", "--port", "0", *options)
    assert says in refused(result, code=2)
    assert "short-token" not in result.stderr  # a token is never shown
