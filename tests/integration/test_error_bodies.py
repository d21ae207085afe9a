"""A failure too large to keep is recorded cut, never refused: the task still ends.

An agent's exception with a 5 MB message (and a 5 MB `detail`, and NUL
characters) ends its task as its classification says: a bug in `error` with an
alert, a refusal `compensated` after its undo. The stored errors keep the main
fields and carry `"truncated": true`.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from shepherd import (
    AgentRequest,
    App,
    PermanentError,
    ProcessState,
    RetryPolicy,
    StepState,
    TaskFailedError,
    WorkflowContext,
)
from shepherd.failures import MESSAGE_LIMIT
from shepherd.payloads import ERROR_FIELD_CHARS
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd import Alert
    from shepherd.core.records import JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
FIVE_MB = 5 * 1024 * 1024


class HugeBug(Exception):
    """An unexpected exception whose message and detail are huge."""

    def __init__(self) -> None:
        super().__init__("\x00" + "m" * FIVE_MB)
        self.detail = {"dump": "d" * FIVE_MB}


async def ended(app: App, task_id: str) -> Task:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


def _assert_cut(error: Any, error_type: str) -> None:
    assert isinstance(error, dict)
    assert error["type"] == error_type
    assert error["truncated"] is True
    assert isinstance(error["detail"], str)
    assert error["detail"].endswith("characters cut]")
    assert len(str(error["message"])) <= MESSAGE_LIMIT + 3


async def test_a_bug_with_a_huge_error_ends_the_task_in_error(
    app: App, alerts: list[Alert]
) -> None:
    @app.agent("buggy", retry=RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.001))
    async def buggy(request: AgentRequest) -> JsonValue:
        raise HugeBug

    @app.workflow("flow")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("buggy", data)

    async with app.running():
        task_id = await app.submit("flow", None)
        task = await ended(app, task_id)
        await wait_until(lambda: bool(alerts), timeout=PATIENCE, message="no alert was raised")

    assert task.process_state is ProcessState.ERROR
    (step,) = task.steps
    assert step.state is StepState.FAILED
    _assert_cut(step.error, "HugeBug")
    assert step.error["bug"] is True
    assert str(step.error["message"]).startswith("\ufffdmmm")  # the NUL replaced, not refused
    assert len(str(step.error["traceback"])) <= 2 * ERROR_FIELD_CHARS  # kept whole
    assert task.error is not None
    assert task.error["type"] == "HugeBug"
    assert [a.task_id for a in alerts] == [task_id]


async def test_a_refusal_with_a_huge_error_compensates_the_task(app: App) -> None:
    undone: list[JsonValue] = []

    @app.agent("reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        return {"reserved": True}

    @app.agent("unreserve")
    async def unreserve(request: AgentRequest) -> JsonValue:
        undone.append(request.payload)
        return None

    @app.agent("charge")
    async def charge(request: AgentRequest) -> JsonValue:
        raise PermanentError("declined\x00" + "!" * FIVE_MB, detail={"dump": "d" * FIVE_MB})

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="unreserve")
        return await ctx.call("charge", data)

    async with app.running():
        task_id = await app.submit("order", None)
        task = await ended(app, task_id)

    assert task.process_state is ProcessState.COMPENSATED
    assert len(undone) == 1
    failed = next(s for s in task.steps if s.agent == "charge")
    assert failed.state is StepState.FAILED
    _assert_cut(failed.error, "PermanentError")
    assert str(failed.error["message"]).startswith("declined\ufffd!!!")
    assert task.error is not None
    assert "declined" in str(task.error["reason"])
