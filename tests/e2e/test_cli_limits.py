"""The CLI's bad input, said about the right input: limits (exit 2 on both backends) and stdin.

Run in the test's process (`shepherd_cli_in_process`): what a command prints
and stores is the point.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from shepherd.core.limits import KEY_BYTES

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

APP = "cliapp:app"
CLEF = "\U0001d11e"  # 4 bytes of UTF-8


@pytest.fixture
def cli(shepherd_cli_in_process: Cli) -> Cli:
    return shepherd_cli_in_process


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, cli_store_url: str) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    return cli_store_url


def one_line_error(completed: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert completed.returncode == code, (completed.stdout, completed.stderr)
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def stored_keys(cli: Cli, store_url: str) -> list[str | None]:
    listed = cli("tasks", "--json", "--store", store_url)
    assert listed.returncode == 0, listed.stderr
    return [task["key"] for task in json.loads(listed.stdout)["tasks"]]


@pytest.mark.parametrize("option", ["--key", "--reply-to"])
def test_a_key_or_reply_to_one_byte_over_its_limit_exits_2_and_stores_nothing(
    cli: Cli, store_url: str, option: str
) -> None:
    longest = CLEF * (KEY_BYTES // 4)
    field = option.removeprefix("--").replace("-", "_")

    message = one_line_error(
        cli("submit", "--app", APP, "hello", "{}", option, "a" + longest, "--store", store_url)
    )

    assert message.startswith(
        f"error: {field} is {KEY_BYTES + 1} bytes of UTF-8, over its limit of {KEY_BYTES} bytes"
    )
    if store_url.startswith("sqlite"):
        assert not Path(store_url.removeprefix("sqlite:///")).exists()
    else:
        assert stored_keys(cli, store_url) == []
    accepted = cli("submit", "--app", APP, "hello", "{}", option, longest, "--store", store_url)
    assert accepted.returncode == 0, accepted.stderr
    assert len(stored_keys(cli, store_url)) == 1


@pytest.mark.parametrize(
    ("stdin", "problem"),
    [
        (b'{"name": "\xff"}', "payload is not UTF-8: byte 0xff at offset 10 (in stdin)"),
        (b'{"name": ', "(in stdin)"),
        (b'{"name": "\xed\xa0\x80"}', "(in stdin)"),  # an encoded lone surrogate
    ],
)
def test_a_problem_in_a_payload_on_stdin_names_stdin(
    cli: Cli, cli_store_url: str, stdin: bytes, problem: str
) -> None:
    message = one_line_error(cli("submit", "--app", APP, "hello", "-", stdin=stdin))

    assert message.endswith(problem)
    assert "JSON argument" not in message
    assert not Path(cli_store_url.removeprefix("sqlite:///")).exists()


def test_a_problem_in_the_json_argument_still_names_the_argument(cli: Cli) -> None:
    message = one_line_error(cli("submit", "--app", APP, "hello", '{"name": '))

    assert message.endswith("(in the JSON argument)")
