"""A store that fails under the roles: nothing is charged to a task, no role dies.

The real store of each backend is wrapped so that chosen operations fail once
or several times, either before anything is written (`StoreUnavailableError`)
or after the write committed (`CommitUnknownError`: the outcome was lost with
the connection). The roles must wait the fault out, settle an unknown outcome
by re-reading, and finish every task with `failure_count` 0. The roles' backoffs
after a fault wait on a FakeClock (`fake_time`), which the tests move.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

import pytest

from shepherd import Alert, App, WorkflowContext
from shepherd.agents import AgentRequest
from shepherd.core.records import JsonValue
from shepherd.core.states import ProcessState
from shepherd.errors import CommitUnknownError, RoleStoppedError, StoreUnavailableError
from support.fake_time import pass_until

pytestmark = pytest.mark.fake_time

if TYPE_CHECKING:
    from shepherd.store.contract import Store


class FlakyStore:
    """The real store, with `faults[method]` failures to inject into that method."""

    def __init__(self, store: Any) -> None:
        self._store = store
        #: method name -> list of "before" / "after" (fail before the write, or after it).
        self.faults: dict[str, list[str]] = {}
        self.injected: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr) or not asyncio.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            plan = self.faults.get(name)
            if plan:
                when = plan.pop(0)
                self.injected.append(f"{name}:{when}")
                if when == "before":
                    raise StoreUnavailableError(f"injected: {name} before the write")
                await attr(*args, **kwargs)
                raise CommitUnknownError(f"injected: {name} outcome lost")
            return await attr(*args, **kwargs)

        return call


def three_steps(app: App) -> None:
    @app.agent("step")
    async def step(request: AgentRequest) -> JsonValue:
        return {"n": request.payload}

    @app.workflow("three", complete_within=30)
    async def three(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        results = []
        for n in range(3):
            try:
                results.append(await ctx.call("step", n))
            except Exception:  # a workflow that catches everything must not see store faults
                return "swallowed"
        return results


async def flaky(app: App) -> FlakyStore:
    await app.open()
    wrapper = FlakyStore(app.store)
    app._store = cast("Store", wrapper)  # a proxy: every other attribute is the store's
    return wrapper


async def finished(app: App, task_id: str) -> Any:
    """Move the app's clock (the roles' backoffs) until the task is processed; the task."""

    async def ended() -> bool:
        task = await app.get_task(task_id)
        return task.process_state is ProcessState.PROCESSED

    await pass_until(app, ended)
    return await app.get_task(task_id)


#: Roles in one process: the task is claimed with its first step's start, steps go
#: straight to its agent worker and replies are recorded where they are made, with
#: the workflow's next write (reply_then: the claim with the first start, the next
#: step's start, the finish). Apart (the scheduler's process runs no agent role):
#: start_step queues, record_replies records.
TOGETHER = ("scheduler", "agent", "supervisor")
APART = ("scheduler", "supervisor")


@pytest.mark.parametrize(
    ("method", "plan", "roles"),
    [
        ("start_step", ["before"], APART),
        ("start_step", ["after"], APART),
        ("start_step", ["before", "before", "before", "before"], APART),
        # Together, the first step's start claims the task (`reply_then` with its
        # claim): a claim that keeps failing is waited out like any write.
        ("reply_then", ["before", "before", "before", "before"], TOGETHER),
        ("finish_task", ["after"], APART),
        ("finish_task", ["before"], APART),
        ("record_replies", ["after"], APART),
        ("record_replies", ["before", "after", "before"], APART),
        ("reply_and_ack", ["after"], APART),
        ("reply_and_ack", ["before", "after", "before"], APART),
        # Together, each reply rides with its workflow's next write (the next step's
        # start, the finish): that one transaction fails before or after its commit.
        ("reply_then", ["before"], TOGETHER),
        ("reply_then", ["after"], TOGETHER),
        ("reply_then", ["before", "after", "before"], TOGETHER),
    ],
)
async def test_a_store_fault_under_a_workflow_is_not_the_tasks_failure(
    app: App, alerts: list[Alert], method: str, plan: list[str], roles: tuple[str, ...]
) -> None:
    three_steps(app)
    store = await flaky(app)
    task_id = await app.submit("three", None)
    store.faults[method] = list(plan)
    async with contextlib.AsyncExitStack() as running:
        await running.enter_async_context(app.running(roles))
        if roles == APART:
            await running.enter_async_context(app.running(["agent"]))
        task = await finished(app, task_id)
    assert task.result == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert task.failure_count == 0
    assert alerts == []
    assert store.injected, "the fault was never injected"
    if method.startswith("reply"):
        # Each reply was recorded once, whichever side of its commit the fault fell on.
        history = await app.history(task_id)
        completed = [e.detail["seq"] for e in history if e.kind == "step_completed"]
        assert sorted(completed) == [1, 2, 3]


async def test_store_outages_of_the_loops_are_waited_out(app: App) -> None:
    three_steps(app)
    store = await flaky(app)
    for method in ("claim_tasks", "take_requests", "record_replies", "expired_claims"):
        store.faults[method] = ["before"] * 3
    task_ids = [await app.submit("three", i) for i in range(5)]
    async with app.running():
        for task_id in task_ids:
            task = await finished(app, task_id)
            assert task.failure_count == 0
    assert {f.split(":")[0] for f in store.injected} >= {
        "claim_tasks",
        "take_requests",
        "record_replies",
    }


async def test_an_outage_is_logged_when_it_starts_and_when_it_ends(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    three_steps(app)
    store = await flaky(app)
    # An idle scheduler looks at the tasks first (`core.claiming`): that read fails.
    store.faults["peek_tasks"] = ["before"] * 4
    task_id = await app.submit("three", None)
    with caplog.at_level(logging.INFO, logger="shepherd"):
        async with app.running():
            await finished(app, task_id)
    lost = [r for r in caplog.records if "scheduler claims: lost the store" in r.getMessage()]
    back = [
        r for r in caplog.records if "scheduler claims: store reachable again" in r.getMessage()
    ]
    assert len(lost) == 1
    assert lost[0].levelno == logging.WARNING
    assert len(back) == 1
    assert "4 failed attempts" in back[0].getMessage()


async def test_a_submit_whose_outcome_is_lost_says_whether_a_retry_is_safe(app: App) -> None:
    three_steps(app)
    store = await flaky(app)
    store.faults["submit_task"] = ["after", "after"]
    with pytest.raises(CommitUnknownError, match=r"same key .* is safe"):
        await app.submit("three", None, key="order-1")
    with pytest.raises(CommitUnknownError, match="may create a second task"):
        await app.submit("three", None)
    # The first one did commit: submitting again with its key returns that task.
    first = await app.submit("three", None, key="order-1")
    assert (await app.get_task(first)).key == "order-1"


async def test_a_role_loop_that_ends_on_its_own_stops_the_process(
    app: App, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    three_steps(app)
    store = await flaky(app)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in the reply loop")

    monkeypatch.setattr(store, "record_replies", broken, raising=False)
    with (
        caplog.at_level(logging.CRITICAL, logger="shepherd"),
        pytest.raises(RoleStoppedError, match="Scheduler role failed: RuntimeError"),
    ):
        await asyncio.wait_for(app.run(["scheduler"]), timeout=30)
    assert any(
        "Scheduler stopped: the Scheduler role failed" in r.getMessage() for r in caplog.records
    )
