"""A running App whose heartbeats cannot reach the store for `worker_ttl` claims nothing until one does.

The store itself works; only the registry's writes fail (the test makes them
raise StoreUnavailableError), as they would for a process cut off from the
store while the rest of the cluster deems it dead. Everything waits on a
FakeClock; each test runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, ProcessState, WorkflowContext
from shepherd.errors import StoreUnavailableError
from shepherd.testing import FakeClock, advance_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

TTL = 10.0
#: Real seconds each move of the clock may take in all (a backstop: every role's
#: wake-ups are moved through one at a time, with store I/O between them).
PATIENCE = 60.0
PAUSED = "no heartbeat has reached the store"
RESUMED = "takes work again"


@pytest.fixture
async def app(store_url: str, fake_clock: FakeClock) -> AsyncIterator[App]:
    app = App(
        store_url,
        alerts=(),
        clock=fake_clock,
        worker_beat=1.0,
        worker_ttl=TTL,
        poll_interval=1.0,
        supervisor_interval=1.0,
        sqlite_synchronous="NORMAL",
    )

    @app.agent("echo")
    async def echo(request: Any) -> Any:
        return request.payload

    @app.workflow("once")
    async def once(ctx: WorkflowContext, data: Any) -> Any:
        return await ctx.call("echo", data)

    try:
        yield app
    finally:
        await app.close()


async def test_beats_failing_for_the_ttl_stop_claims_until_a_beat_reaches_the_store(
    app: App, fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="shepherd.registry")
    await app.open()
    store = app.store
    beat, register = store.beat_worker, store.register_worker
    down = False
    beats = 0

    async def beat_worker(instance: str) -> bool:
        nonlocal beats
        if down:
            raise StoreUnavailableError("did not answer within store_timeout (5 s)")
        beats += 1
        return await beat(instance)

    async def register_worker(instance: str, **row: Any) -> Any:
        if down:
            raise StoreUnavailableError("did not answer within store_timeout (5 s)")
        return await register(instance, **row)

    # Instance attributes: only this app's registry sees them.
    store.beat_worker = beat_worker
    store.register_worker = register_worker
    async with app.running():
        await advance_until(
            fake_clock, lambda: beats >= 1, step=1.0, timeout=PATIENCE, message="no beat"
        )
        down = True
        await advance_until(
            fake_clock,
            lambda: PAUSED in caplog.text,
            step=1.0,
            timeout=PATIENCE,
            message="never paused",
        )
        task_id = await app.submit("once", {"n": 1})
        # Several polls of the claim loop go by: the task stays pending.
        until = fake_clock.monotonic() + 5.0
        await advance_until(
            fake_clock, lambda: fake_clock.monotonic() >= until, step=1.0, timeout=PATIENCE
        )
        task = await app.get_task(task_id)
        assert task is not None
        assert task.process_state is ProcessState.PENDING

        down = False

        async def processed() -> bool:
            got = await app.get_task(task_id)
            return got is not None and got.process_state is ProcessState.PROCESSED

        await advance_until(
            fake_clock, processed, step=1.0, timeout=PATIENCE, message="never claimed again"
        )

    assert caplog.text.count(PAUSED) == 1
    assert caplog.text.count(RESUMED) == 1
