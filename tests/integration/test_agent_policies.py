"""Per-call retry policies and the agent counters, in an App running all its roles.

On a FakeClock (`fake_time`): the retries' sleeps and the steps' windows pass
when the tests move it (support.fake_time).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import (
    AgentRequest,
    App,
    PermanentError,
    ProcessState,
    RetryPolicy,
    TransientError,
    WorkflowContext,
)
from shepherd.testing import wait_until
from support.fake_time import WINDOW, ended

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


def quick(max_attempts: int) -> RetryPolicy:
    """A retry policy that waits a millisecond between tries."""
    return RetryPolicy(max_attempts=max_attempts, initial_delay=0.001, max_delay=0.001)


async def test_a_call_can_override_the_agents_retry_policy(app: App) -> None:
    tries: dict[str, int] = {}

    @app.agent("flaky", retry=quick(5))
    async def flaky(request: AgentRequest) -> JsonValue:
        label = request.payload["label"]
        tries[label] = tries.get(label, 0) + 1
        if tries[label] < request.payload["succeeds_on"]:
            raise TransientError("busy")
        return {"tries": tries[label]}

    @app.workflow("patient")
    async def patient(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data, within=5 * WINDOW)

    @app.workflow("impatient", max_failures=1)
    async def impatient(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("flaky", data, within=WINDOW, retry=quick(2))

    async with app.running():
        ok = await app.submit("patient", {"label": "a", "succeeds_on": 4})
        await ended(app, ok)
        assert await app.result(ok, timeout=PATIENCE) == {"tries": 4}
        short = await app.submit("impatient", {"label": "b", "succeeds_on": 4})
        task = await ended(app, short)

    # The agent's own policy allowed 5 tries; this call allowed 2, then gave up.
    assert tries == {"a": 4, "b": 2}
    assert task.process_state is ProcessState.ERROR
    gave_up = [e.detail for e in await app.history(short) if e.kind == "step_gave_up"]
    assert gave_up
    assert gave_up[0]["tries"] == 2
    assert gave_up[0]["error"]["message"] == "busy"


async def test_agent_counters_count_calls_retries_timeouts_and_failures(app: App) -> None:
    hung = asyncio.Event()

    @app.agent("flaky", retry=quick(3))
    async def flaky(request: AgentRequest) -> JsonValue:
        if request.retry < 2:
            raise TransientError("busy")
        return {"ok": True}

    @app.agent("refuses")
    async def refuses(request: AgentRequest) -> JsonValue:
        raise PermanentError("no such account")

    @app.agent("hangs")
    async def hangs(request: AgentRequest) -> JsonValue:
        hung.set()
        await asyncio.Event().wait()
        return None

    @app.workflow("flow", max_failures=1)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call(data["agent"], data, within=WINDOW)

    async with app.running():
        ids = [await app.submit("flow", {"agent": name}) for name in ("flaky", "refuses", "hangs")]
        await wait_until(hung.is_set, timeout=PATIENCE)  # the clock stands still meanwhile
        outcomes = [await ended(app, task_id) for task_id in ids]

    assert [t.process_state for t in outcomes] == [
        ProcessState.PROCESSED,
        ProcessState.COMPENSATED,
        ProcessState.ERROR,
    ]
    metrics = app.metrics
    assert metrics.value("calls", agent="flaky") == 3
    assert metrics.value("retries", agent="flaky") == 2
    assert metrics.value("failures", agent="flaky", kind="transient") == 2
    assert metrics.value("calls", agent="refuses") == 1
    assert metrics.value("failures", agent="refuses", kind="permanent") == 1
    assert metrics.value("retries", agent="refuses") == 0
    assert metrics.value("timeouts", agent="hangs") == 1
    assert metrics.value("timeouts", agent="flaky") == 0
    assert "shepherd_agent_calls_total{agent=flaky}" in metrics.snapshot()
