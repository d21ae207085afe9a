"""How many store transactions a lone three-step workflow takes in one process: counted.

The store counts its writer's commits (`statistics()["commits"]`: every write
transaction, on SQLite and on PostgreSQL alike; reads are not counted, nor on
PostgreSQL the read pool's transactions). The app runs the roles a workflow
needs (scheduler and agent) on a FakeClock that stands still, so no periodic
work (a beat, a poll) commits while the workflow runs; a first workflow runs
to its end before the one counted, so that the roles' first writes at start
(the worker's registration, their first polls) are behind it. The count is the
workflow's alone, and a count, not a time: it does not depend on the load.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, WorkflowContext
from shepherd.core.states import ProcessState, StepState
from shepherd.errors import PermanentError
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

#: Real seconds the test waits for the result before it fails (a backstop).
PATIENCE = 15.0
STEPS = 3
#: Today's count: the submit, the claim, the first step's start, then each step's
#: reply with the next step's start (the last one's with the finish). 9 before
#: issue 34: each step's start and its reply apart (3 x 2), and the finish.
TODAY = 1 + 1 + 1 + STEPS


def _three_steps(app: App) -> None:
    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("three")
    async def three(ctx: WorkflowContext, data: Any) -> JsonValue:
        total = 0
        for i in range(STEPS):
            total += await ctx.call("noop", i)
        return total


def _commits(app: App) -> int:
    return int(app.store.statistics()["commits"])


async def test_a_lone_three_step_workflow_takes_six_transactions(app: App) -> None:
    """A lone workflow of three steps, all roles in one process: 6 commits (9 before).

    Submit, claim, start 1, then each step's reply in one transaction with
    the workflow's next write: reply 1 + start 2, reply 2 + start 3, reply 3 +
    the finish (`reply_then`).
    """
    _three_steps(app)
    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("three", {})
        assert await app.result(warm_up, timeout=PATIENCE) == 3
        before = _commits(app)
        task_id = await app.submit("three", {})
        assert await app.result(task_id, timeout=PATIENCE) == 3
        took = _commits(app) - before
    assert took == TODAY, f"a lone {STEPS}-step workflow took {took} transactions"


async def _measured(app: App, workflow: str, expected: JsonValue) -> int:
    """Commits of one run of `workflow` after a warm-up run (roles already started)."""
    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit(workflow, {})
        assert await app.result(warm_up, timeout=PATIENCE) == expected
        before = _commits(app)
        task_id = await app.submit(workflow, {})
        assert await app.result(task_id, timeout=PATIENCE) == expected
        return _commits(app) - before


async def test_two_parallel_steps_between_two_others(app: App) -> None:
    """Step 1, then steps 2 and 3 in parallel (`asyncio.gather`), then the finish: 6 (9 before).

    Submit, claim, start 1, reply 1 with the starts of 2 and 3 (the start of 3
    rides in the same batch), reply 2 alone (its step is handed over, but the
    workflow waits for step 3, which is not a write: the reply is withdrawn
    after its turns and committed alone), reply 3 with the finish. When both
    replies come within the same few turns, both ride with the finish: 5.
    """

    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("fan")
    async def fan(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("noop", 1)
        second, third = await asyncio.gather(ctx.call("noop", 2), ctx.call("noop", 3))
        return [first, second, third]

    took = await _measured(app, "fan", [1, 2, 3])
    assert took <= 6, f"took {took} transactions"


async def test_a_refused_step_and_its_compensation(app: App) -> None:
    """Step 1 succeeds, step 2 is refused, step 1 is undone: 7 transactions (10 before).

    Submit, claim, start 1, reply 1 with the start of 2, reply 2 (a refusal)
    with the start of the compensation, the start of the undo step, and its
    reply with the task's end (`compensated`).
    """

    @app.agent("ok")
    async def ok(request: Any) -> JsonValue:
        return request.payload

    @app.agent("undo_ok")
    async def undo_ok(request: Any) -> JsonValue:
        return None

    @app.agent("refuse")
    async def refuse(request: Any) -> JsonValue:
        raise PermanentError("refused")

    @app.workflow("refused")
    async def refused(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("ok", 1, undo="undo_ok")
        return await ctx.call("refuse", 2)

    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("refused", {})
        await _ended(app, warm_up)
        before = _commits(app)
        task_id = await app.submit("refused", {})
        task = await _ended(app, task_id)
        took = _commits(app) - before
    assert task.process_state is ProcessState.COMPENSATED
    assert took == 7, f"took {took} transactions"


async def test_a_workflow_that_raises_between_two_steps(app: App) -> None:
    """Step 1, then the body raises: submit, claim, start 1, reply 1 with the task's error: 4 (5 before)."""

    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("raises")
    async def raises(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("noop", 1)
        raise RuntimeError("a bug between two steps")

    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("raises", {})
        await _ended(app, warm_up)
        before = _commits(app)
        task_id = await app.submit("raises", {})
        task = await _ended(app, task_id)
        took = _commits(app) - before
    assert task.process_state is ProcessState.ERROR
    assert [s.state for s in task.steps] == [StepState.COMPLETED]
    assert took == 4, f"took {took} transactions"


async def _ended(app: App, task_id: str) -> Any:
    """The task, once it has ended (polled, with a real-time deadline as a backstop)."""

    async def ended() -> bool:
        task = await app.get_task(task_id)
        return task.process_state in (ProcessState.COMPENSATED, ProcessState.ERROR)

    await wait_until(ended, timeout=PATIENCE)
    return await app.get_task(task_id)


async def test_a_lone_three_step_workflow_through_an_exclusive_agent(app: App) -> None:
    """The same three steps, each through an exclusive agent's owner in the same process: 10.

    Submit, claim, start 1; then per step the owner's take of it
    (`take_key_work`, fenced by the key's lease) and its reply with the owner
    state, which rides with the workflow's next write (`reply_then`: reply 1 +
    start 2, reply 2 + start 3, reply 3 + the finish); last, the key's loop
    looks once more and finds nothing (an empty take is a write too). 12
    before the reply rode (each reply alone, `reply_owned`). Target: 6, as for
    plain steps: the start would hand the request to the key's owner of this
    process as it hands a plain step's to its agent worker, with no take; not
    built yet. The count waits for the loop's last look of each run, which
    may come before or after its result is read.
    """
    takes: list[bool] = []  # per finished take of the key's work: whether it found any
    take_key_work = app.store.take_key_work

    async def spy(*args: Any, **kwargs: Any) -> Any:
        takes.append(True)
        steps, calls, given_up = await take_key_work(*args, **kwargs)
        takes[-1] = bool(steps or calls or given_up)
        return steps, calls, given_up

    app.store.take_key_work = spy

    async def looked_again() -> bool:
        return bool(takes) and takes[-1] is False

    @app.agent("ledger", exclusive_by="user")
    async def ledger(request: Any) -> JsonValue:
        return request.payload["n"]

    @app.workflow("three_owned")
    async def three_owned(ctx: WorkflowContext, data: Any) -> JsonValue:
        total = 0
        for i in range(STEPS):
            total += await ctx.call("ledger", {"user": "user-1", "n": i})
        return total

    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("three_owned", {})
        assert await app.result(warm_up, timeout=PATIENCE) == 3
        await wait_until(looked_again, timeout=PATIENCE)
        before = _commits(app)
        task_id = await app.submit("three_owned", {})
        assert await app.result(task_id, timeout=PATIENCE) == 3
        await wait_until(looked_again, timeout=PATIENCE)
        took = _commits(app) - before
    assert took == 1 + 1 + 1 + 2 * STEPS + 1, (
        f"a lone {STEPS}-step workflow took {took} transactions"
    )


async def test_a_step_a_sleep_and_a_step(app: App) -> None:
    """Step 1, a sleep, step 2: the sleep's write carries step 1's reply, as a step's start does.

    Until asleep, 4, as a lone two-step workflow takes until its second step
    starts: submit, claim, start 1, reply 1 with the sleep (its step recorded
    and the claim given up, `reply_then`). Woken (here by an operator, 1 of
    its own, as the clock stands still), 3 more: the claim, start 2, reply 2
    with the finish. The sleep costs one claim (a task waiting holds none).
    """

    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("nap")
    async def nap(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("noop", 1)
        await ctx.sleep(3600)
        return [first, await ctx.call("noop", 2)]

    async def asleep(task_id: str) -> bool:
        task = await app.get_task(task_id)
        return task.process_state is ProcessState.PENDING and len(task.steps) == 2

    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("nap", {})
        await wait_until(lambda: asleep(warm_up), timeout=PATIENCE)
        await app.operations.wake(warm_up)
        assert await app.result(warm_up, timeout=PATIENCE) == [1, 2]
        before = _commits(app)
        task_id = await app.submit("nap", {})
        await wait_until(lambda: asleep(task_id), timeout=PATIENCE)
        to_sleep = _commits(app) - before
        await app.operations.wake(task_id)
        assert await app.result(task_id, timeout=PATIENCE) == [1, 2]
        after_wake = _commits(app) - before - to_sleep
    assert (to_sleep, after_wake) == (4, 1 + 3), f"took {to_sleep} + {after_wake}"


async def test_a_parent_with_one_child_of_one_step(app: App) -> None:
    """A parent awaiting one child that runs one step: 8 transactions in all.

    The parent: submit, claim, the child's start with its own wait (the step,
    the child task and its link, the claim given up: one `start_child`). The
    child: its claim, its step's start, its reply riding its end, which also
    records the parent's step and wakes the parent (`end_child` in
    `reply_then`). The parent again: its claim, and its finish. Against a lone
    one-step workflow (4), the child costs what a task of its own costs less
    its submit (3), and the parent one claim more: it waits holding none.
    """

    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("shipment")
    async def shipment(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("noop", data)

    @app.workflow("order")
    async def order(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.run_workflow("shipment", data)

    async with app.running(["scheduler", "agent"]):
        warm_up = await app.submit("order", 1)
        assert await app.result(warm_up, timeout=PATIENCE) == 1
        before = _commits(app)
        task_id = await app.submit("order", 2)
        assert await app.result(task_id, timeout=PATIENCE) == 2
        took = _commits(app) - before
    assert took == 8, f"a parent with one child of one step took {took} transactions"
