"""`shepherd tokens`, and `retry`/`cancel --by`, on SQLite and PostgreSQL.

The commands run in the test's process (`shepherd_cli_in_process`): what they print and
store is the point here, not the process.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from shepherd.core.states import ProcessState
from shepherd.store import open_store
from shepherd.store.contract import NewTask
from support.cli_checks import ok, ok_json, refused

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_OWNER = "elsewhere:1:0000/s"


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` on the test's shared store, as the OS user `ops-bot`."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store, "LOGNAME": "ops-bot"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return shepherd_cli_in_process(*args, env=env)

    return run


def _in_store(url: str, work: Callable[[Any], Any]) -> Any:
    """Run `work(store)` on an opened store at `url` (made and migrated if new)."""

    async def go() -> Any:
        store = open_store(url)
        await store.open()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(go())


async def _failed(store: Any) -> str:
    """A task failed into `error` by its owner; its id."""
    task_id = (await store.submit_task(NewTask(workflow="orders.pay", input={}))).task_id
    (claimed,) = await store.claim_tasks(locked_by=_OWNER, limit=10)
    await store.fail_task(
        task_id,
        locked_by=_OWNER,
        epoch=claimed.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "declined"},
    )
    return str(task_id)


def test_a_token_is_printed_once_and_only_its_operator_is_listed(
    cli: Cli, shared_store: str
) -> None:
    _in_store(shared_store, lambda store: store.list_operators())

    added = ok(cli("tokens", "add", "anna"))
    first, second = added.strip().splitlines()
    assert first.startswith("operator anna: token ")
    assert "will not be shown again" in second
    token = first.rsplit(" ", 1)[1]
    listed = ok(cli("tokens", "list"))
    assert "anna" in listed
    assert "never" in listed
    assert token not in listed
    assert _in_store(shared_store, lambda store: store.authenticate(token)) == "anna"
    as_json = ok_json(cli("tokens", "list", "--json"))
    assert [o["name"] for o in as_json["operators"]] == ["anna"]
    assert as_json["operators"][0]["last_used_at"] is not None  # authenticated above
    assert token not in str(as_json)

    bot = ok_json(cli("tokens", "add", "bot-1", "--json"))
    assert bot["operator"] == "bot-1"
    assert len(bot["token"]) >= 40

    assert "exists already" in refused(cli("tokens", "add", "anna"))
    assert "operator's name" in refused(cli("tokens", "add", "an na"))
    assert ok_json(cli("tokens", "remove", "anna", "--json")) == {"removed": "anna"}
    assert _in_store(shared_store, lambda store: store.authenticate(token)) is None
    assert "no operator is named 'anna'" in refused(cli("tokens", "remove", "anna"))
    assert "no operators" not in ok(cli("tokens", "list"))
    ok(cli("tokens", "remove", "bot-1"))
    assert ok(cli("tokens", "list")).strip() == "no operators"


def test_retry_and_cancel_record_who_did_it(cli: Cli, shared_store: str) -> None:
    retried, cancelled, defaulted = (_in_store(shared_store, _failed) for _ in range(3))

    ok(cli("retry", retried, "--by", "anna"))
    ok(cli("cancel", cancelled, "--by", "ben"))
    ok(cli("cancel", defaulted))  # the OS user

    def who(task_id: str, kind: str) -> list[Any]:
        shown = ok_json(cli("show", task_id, "--json"))
        return [e["detail"].get("by") for e in shown["history"] if e["kind"] == kind]

    assert who(retried, "retried") == ["anna"]
    assert who(cancelled, "cancel_requested") == ["ben"]
    assert who(defaulted, "cancel_requested") == ["ops-bot"]
    assert "'by' is empty" in refused(cli("cancel", retried, "--by", " "))
    assert who(retried, "cancel_requested") == []
