"""`shepherd top`'s frame read from a real store, SQLite and PostgreSQL (the `app` fixture).

An App running every role ends one task `processed`, one `compensated` and
one in `error`; the frame counts them per state and over the last minute (a
compensated task apart from those in error), lists the failure with its open
alert, and sees this process alive and the supervisor leading.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from shepherd import PermanentError, ProcessState, RetryPolicy, TaskFailedError
from shepherd.cli.top_view import read_frame
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def test_the_frame_counts_states_the_last_minute_and_the_failures(app: App) -> None:
    @app.agent("charge", retry=RetryPolicy(max_attempts=1))
    async def charge(request: AgentRequest) -> JsonValue:
        if request.payload == {"card": None}:
            raise ValueError("no card")  # a bug: the task goes to error
        if request.payload == {"card": "declined"}:
            raise PermanentError("card declined")  # refused for good: the task is undone
        return request.payload

    @app.workflow("orders.pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("charge", data)

    async with app.running():
        paid = await app.submit("orders.pay", {"card": "4242"})
        failed = await app.submit("orders.pay", {"card": None})
        declined = await app.submit("orders.pay", {"card": "declined"})
        await app.result(paid, timeout=PATIENCE)
        for ending in (failed, declined):
            with contextlib.suppress(TaskFailedError):
                await app.result(ending, timeout=PATIENCE)

        async def led() -> bool:
            return (await read_frame(app.operations)).leader is not None

        await wait_until(led, timeout=PATIENCE, message="no supervisor leads")
        frame = await read_frame(app.operations)

    assert frame.counts[ProcessState.PROCESSED] == 1
    assert frame.counts[ProcessState.ERROR] == 1
    assert frame.counts[ProcessState.COMPENSATED] == 1
    assert sum(frame.counts.values()) == 3
    assert frame.ended == 3
    assert frame.minute == (1, 1, 1, 0)  # processed, compensated, error, cancelled
    assert [task.id for task in frame.failures] == [failed]
    assert frame.open_alerts == frozenset({failed})
    assert frame.workers_alive == 1
    assert frame.leader is not None
    assert frame.leader.holder.startswith(app.instance)
