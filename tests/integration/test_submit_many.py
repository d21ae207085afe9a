"""`App.submit_many`: many tasks in one transaction, checked first, keys deduplicated.

Runs on both backends (the `app` fixture). The refusals come before any access
to the store, as the checks on stores that cannot be reached at all show (on
both backends' URLs); that they write nothing is checked on SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shepherd import App, PayloadError, Submission, UnknownWorkflowError, WorkflowContext
from support.backends import sqlite_only


def _register(app: App) -> None:
    @app.workflow()
    async def double(ctx: WorkflowContext, data: Any) -> Any:
        return data * 2

    @app.workflow()
    async def echo(ctx: WorkflowContext, data: Any) -> Any:
        return data


async def test_every_task_runs_and_the_ids_come_back_in_order(app: App) -> None:
    _register(app)
    ids = await app.submit_many(
        [Submission("double", n, key=f"n-{n}", reply_to="inbox") for n in range(20)]
    )
    assert len(set(ids)) == 20
    async with app.running():
        assert [await app.result(task_id, timeout=30) for task_id in ids] == [
            n * 2 for n in range(20)
        ]
    task = await app.get_task(ids[3])
    assert (task.workflow, task.key, task.reply_to, task.input) == ("double", "n-3", "inbox", 3)


async def test_keys_are_deduplicated_within_the_call_and_against_earlier_submits(
    app: App,
) -> None:
    _register(app)
    earlier = await app.submit("echo", "earlier", key="a")

    ids = await app.submit_many(
        [
            Submission("echo", "first b", key="b"),
            Submission("echo", "again a", key="a"),
            Submission("echo", "again b", key="b"),
            Submission("double", 21, key="b"),  # keys are per workflow
            Submission("echo"),
        ]
    )

    assert ids[1] == earlier
    assert ids[0] == ids[2]
    assert len({earlier, ids[0], ids[3], ids[4]}) == 4
    assert (await app.get_task(ids[0])).input == "first b"
    assert (await app.get_task(ids[4])).input is None
    assert len(await app.list_tasks()) == 4
    # Submitting the same list again creates nothing.
    assert await app.submit_many(
        [
            Submission("echo", "first b", key="b"),
            Submission("echo", "again a", key="a"),
            Submission("double", 21, key="b"),
        ]
    ) == [ids[0], earlier, ids[3]]
    assert len(await app.list_tasks()) == 4


REFUSALS = [
    pytest.param(
        Submission("nope", 1),
        UnknownWorkflowError,
        "submissions[2]: unknown workflow 'nope' (known: double, echo)",
        id="unknown-workflow",
    ),
    pytest.param(
        Submission("echo", 1, key="a\x00b"),
        PayloadError,
        "submissions[2]: key contains a NUL character, which PostgreSQL rejects",
        id="nul-key",
    ),
    pytest.param(
        Submission("echo", 1, reply_to=7),  # type: ignore[arg-type]
        PayloadError,
        "submissions[2]: reply_to must be a str, not int",
        id="int-reply_to",
    ),
    pytest.param(
        ("echo", 1),
        PayloadError,
        "submissions[2]: must be a Submission, not tuple",
        id="not-a-submission",
    ),
]


@pytest.mark.parametrize(("bad", "error", "message"), REFUSALS)
@sqlite_only()
async def test_one_bad_submission_refuses_the_call_before_anything_is_written(
    app: App, bad: Any, error: type[Exception], message: str
) -> None:
    _register(app)
    good = [Submission("echo", n, key=f"k{n}") for n in range(4)]

    with pytest.raises(error) as caught:
        await app.submit_many([*good[:2], bad, *good[2:]])

    assert str(caught.value) == message
    assert await app.list_tasks() == []


@sqlite_only()
async def test_a_bad_payload_refuses_the_call_and_writes_nothing(app: App) -> None:
    _register(app)
    submissions = [Submission("echo", n, key=f"k{n}") for n in range(4)]
    submissions.insert(1, Submission("echo", {"amount": float("nan")}))

    with pytest.raises(PayloadError, match=r"^submissions\[1\]: payload is not JSON: .*NaN"):
        await app.submit_many(submissions)

    assert await app.list_tasks() == []
    assert await app.store.read_events(reply_to=None, after_id=0) == []
    # The keys of the refused call were never used.
    assert len(set(await app.submit_many(submissions[:1] + submissions[2:]))) == 4


@sqlite_only()
async def test_nothing_to_submit_returns_no_ids(app: App) -> None:
    _register(app)
    assert await app.submit_many([]) == []
    assert await app.submit_many(iter(())) == []
    assert await app.list_tasks() == []


@pytest.mark.parametrize("scheme", ["sqlite", "postgresql"])
@pytest.mark.parametrize(("bad", "error", "message"), REFUSALS)
async def test_bad_submissions_are_refused_before_any_store_access(
    tmp_path: Path, scheme: str, bad: Any, error: type[Exception], message: str
) -> None:
    unreachable = {
        "sqlite": f"sqlite:///{tmp_path}/no-such-directory/s.db",
        "postgresql": "postgresql://shepherd@127.0.0.1:1/nowhere",
    }[scheme]
    app = App(unreachable, alerts=())
    _register(app)
    try:
        with pytest.raises(error) as caught:
            await app.submit_many([Submission("echo"), Submission("double", 2), bad])
        assert str(caught.value) == message
    finally:
        await app.close()
