"""The demo's summary counts every ended task's events, even while the server holds them back.

On PostgreSQL an event is readable only once every transaction older than its
own has ended, on the whole server. A summary read while another client's
transaction is open would count the last steps short; it waits for the events
of every ended task instead (within its patience).
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from shepherd import App
from shepherd.core.events import EventKind
from shepherd.demo import summary
from shepherd.scheduler import WorkflowContext
from shepherd.testing import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(60)]

TASKS = 5


@pytest.mark.usefixtures("postgres_server")
async def test_the_summary_waits_for_the_events_an_older_transaction_holds_back(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(postgres_url, alerts=(), poll_interval=0.01)

    @app.agent("echo")
    async def echo(request: object) -> str:
        return "ok"

    @app.workflow("twice")
    async def twice(ctx: WorkflowContext, data: object) -> str:
        await ctx.call("echo", None)
        return str(await ctx.call("echo", None))

    reads = 0
    read_events = app.store.read_events

    async def counted(**kwargs: object) -> object:
        nonlocal reads
        reads += 1
        return await read_events(**kwargs)  # type: ignore[arg-type]

    async with app:
        async with await psycopg.AsyncConnection.connect(postgres_url) as held:
            await held.execute("SELECT txid_current()")  # an older transaction, left open
            async with app.running():
                ids = [await app.submit("twice", None) for _ in range(TASKS)]
                for task_id in ids:
                    await app.result(task_id, timeout=30)
            monkeypatch.setattr(app.store, "read_events", counted)
            kinds = asyncio.create_task(summary._event_kinds(app, TASKS))
            await wait_until(lambda: reads >= 3, timeout=30, message="the summary read once only")
            assert not kinds.done()  # it waits: the events are held back
            await held.commit()
        found, _ = await kinds
    assert found[EventKind.PROCESSED] == TASKS
    assert found[EventKind.STEP_COMPLETED] == 2 * TASKS
    await app.close()
