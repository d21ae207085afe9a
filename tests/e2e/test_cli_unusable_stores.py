"""Commands that read or operate never create or migrate a store, on SQLite and PostgreSQL.

Every operator command, its writing actions and the dashboard, pointed at a
missing SQLite file, an empty database, another application's file or
database, one with its own `tasks` table, a store migrated by newer code or
one that misses a migration: exit 6 with a message saying which, and the file
or database left byte for byte as it was. The commands run in the test's
process (`shepherd_cli_in_process`); one runs as a real process. `submit`
still creates a store where none is.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli_checks import ok, refused
from support.unusable_stores import KINDS, fingerprint, prepare

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: Every command that must not create or migrate, with arguments that would pass
#: their own checks; the store is given by SHEPHERD_STORE.
COMMANDS: list[tuple[str, ...]] = [
    ("tasks",),
    ("tasks", "--json"),
    ("show", "0123456789abcdef"),
    ("retry", "0123456789abcdef"),
    ("cancel", "0123456789abcdef"),
    ("workers",),
    ("alerts",),
    ("alerts", "ack", "1", "--by", "ops"),
    ("breakers",),
    ("top", "--once"),
    ("purge", "--older-than", "1d"),
    ("resources", "list"),
    ("resources", "set", "orders-db", "--capacity", "2"),
    ("resources", "remove", "orders-db"),
    ("partitions", "list"),
    ("partitions", "unassign", "user-1"),
    ("tokens", "list"),
    ("tokens", "add", "alice"),
    ("tokens", "remove", "alice"),
    ("dashboard", "--port", "0"),
    ("tasks", "--app", "cliapp:app"),  # an app that declares nothing is opened as the store
]


def _place(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A SQLite path where no file is yet, or an empty PostgreSQL database."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/{uuid.uuid4().hex}.db"
    make = request.getfixturevalue("make_postgres_url")
    url: str = make(empty=True)
    return url


@pytest.mark.parametrize(
    ("backend", "kind"),
    [("sqlite", kind) for kind in sorted(KINDS)]
    + [("postgres", kind) for kind in sorted(KINDS) if kind != "missing"],
)
def test_every_reading_command_refuses_an_unusable_store_and_leaves_it_unchanged(
    shepherd_cli_in_process: Cli,
    cli_env: dict[str, str],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    backend: str,
    kind: str,
) -> None:
    url = _place(backend, request, tmp_path / "stores")
    (tmp_path / "stores").mkdir()
    asyncio.run(prepare(kind, url))
    before = fingerprint(url)
    env = {**cli_env, "SHEPHERD_STORE": url}

    for args in COMMANDS:
        line = refused(shepherd_cli_in_process(*args, env=env), 6)
        assert KINDS[kind].says in line, (args, line)
        assert fingerprint(url) == before, f"{' '.join(args)} changed the {kind} store"
    if kind == "missing":
        assert list((tmp_path / "stores").iterdir()) == [], "a command created files"


def test_a_reading_process_exits_6_and_leaves_another_applications_file_alone(
    shepherd_cli: Cli, cli_env: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/notes.db"
    asyncio.run(prepare("foreign", url))
    before = fingerprint(url)

    line = refused(shepherd_cli("tasks", env={**cli_env, "SHEPHERD_STORE": url}), 6)

    assert f"SQLite file '{tmp_path}/notes.db' is not a shepherd store" in line
    assert fingerprint(url) == before


def test_submit_still_creates_the_store_that_reading_commands_then_use(
    shepherd_cli_in_process: Cli, cli_env: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    env = {**cli_env, "SHEPHERD_STORE": url}
    assert "does not exist" in refused(shepherd_cli_in_process("tasks", env=env), 6)

    task_id = ok(shepherd_cli_in_process("submit", "--app", "cliapp:app", "hello", "{}", env=env))

    assert task_id.strip() in ok(shepherd_cli_in_process("tasks", env=env))
