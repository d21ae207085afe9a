"""`App.submit` refuses a `key` or `reply_to` no store can keep, naming it, before touching the store.

The refusals come before any access to the store, as the checks on stores that
cannot be reached at all show (on both backends' URLs); that they change nothing
is checked on SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shepherd import App, PayloadError, WorkflowContext
from support.backends import sqlite_only

BAD_ARGUMENTS = [
    pytest.param(
        {"key": "order-\ud800"},
        "key contains a lone surrogate '\\ud800' at position 6, which is not valid UTF-8",
        id="surrogate-key",
    ),
    pytest.param(
        {"reply_to": "\udfffreplies"},
        "reply_to contains a lone surrogate '\\udfff' at position 0, which is not valid UTF-8",
        id="surrogate-reply_to",
    ),
    pytest.param({"key": 42}, "key must be a str, not int", id="int-key"),
    pytest.param({"reply_to": b"q"}, "reply_to must be a str, not bytes", id="bytes-reply_to"),
    pytest.param(
        {"key": "a\x00b"}, "key contains a NUL character, which PostgreSQL rejects", id="nul-key"
    ),
]


def _register(app: App) -> None:
    @app.workflow()
    async def noop(ctx: WorkflowContext, data: Any) -> Any:
        return data


@pytest.mark.parametrize(("arguments", "problem"), BAD_ARGUMENTS)
@sqlite_only()
async def test_bad_key_or_reply_to_is_refused_and_changes_nothing(
    app: App, arguments: dict[str, Any], problem: str
) -> None:
    _register(app)
    with pytest.raises(PayloadError) as caught:
        await app.submit("noop", {"n": 1}, **arguments)
    assert str(caught.value) == problem
    assert await app.list_tasks() == []
    # The app is still usable with good arguments.
    task_id = await app.submit("noop", {"n": 1}, key="order-1", reply_to="replies")
    assert [task.id for task in await app.list_tasks()] == [task_id]


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("arguments", "problem"), BAD_ARGUMENTS)
async def test_bad_arguments_are_refused_before_any_store_access(
    tmp_path: Path, scheme: str, arguments: dict[str, Any], problem: str
) -> None:
    unreachable = {
        "sqlite": f"sqlite:///{tmp_path}/no-such-directory/s.db",
        "postgresql": "postgresql://shepherd@127.0.0.1:1/nowhere",
    }[scheme]
    app = App(unreachable, alerts=())
    _register(app)
    try:
        with pytest.raises(PayloadError) as caught:
            await app.submit("noop", None, **arguments)
        assert str(caught.value) == problem
    finally:
        await app.close()
