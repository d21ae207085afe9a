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
import functools
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
#: Today's count: the submit, the first step's start with the task's claim (a
#: scheduler with little to do claims a task with its first write:
#: `core.claiming`), then each step's reply with the next step's start (the last
#: one's with the finish). 9 before issue 34: the claim, each step's start and
#: its reply apart (3 x 2), and the finish; 6 before the claim rode.
TODAY = 1 + 1 + STEPS


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


async def test_a_lone_three_step_workflow_takes_five_transactions(app: App) -> None:
    """A lone workflow of three steps, all roles in one process: 5 commits (9 before).

    Submit, claim with start 1, then each step's reply in one transaction with
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
    """Step 1, then steps 2 and 3 in parallel (`asyncio.gather`), then the finish: 5 (9 before).

    Submit, claim with start 1, reply 1 with the starts of 2 and 3 (the start of 3
    rides in the same batch), reply 2 alone (its step is handed over, but the
    workflow waits for step 3, which is not a write: the reply is withdrawn
    after its turns and committed alone), reply 3 with the finish. When both
    replies come within the same few turns, both ride with the finish: 4.
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
    assert took <= 5, f"took {took} transactions"


async def test_a_refused_step_and_its_compensation(app: App) -> None:
    """Step 1 succeeds, step 2 is refused, step 1 is undone: 6 transactions (10 before).

    Submit, claim with start 1, reply 1 with the start of 2, reply 2 (a refusal)
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
    assert took == 6, f"took {took} transactions"


async def test_a_workflow_that_raises_between_two_steps(app: App) -> None:
    """Step 1, then the body raises: submit, claim with start 1, reply 1 with the task's error: 3
    (5 before)."""

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
    assert took == 3, f"took {took} transactions"


async def _ended(app: App, task_id: str) -> Any:
    """The task, once it has ended (polled, with a real-time deadline as a backstop)."""

    async def ended() -> bool:
        task = await app.get_task(task_id)
        return task.process_state in (ProcessState.COMPENSATED, ProcessState.ERROR)

    await wait_until(ended, timeout=PATIENCE)
    return await app.get_task(task_id)


async def test_a_lone_three_step_workflow_through_an_exclusive_agent(app: App) -> None:
    """The same three steps, each through an exclusive agent's owner in the same process: 5,
    as for plain steps (10 before steps were handed to their owner, 12 before the reply rode).

    Submit, claim with start 1, then each step's reply with the owner state
    and the workflow's next write (`reply_then`: reply 1 + start 2, reply 2 +
    start 3, reply 3 + the finish). Each start hands its request to the key's
    owner in this process as it is queued (taken by the owner's worker behind
    the owner's fence), so the owner never takes the key's work from the
    store (`take_key_work`: it was a write per step, and an empty one after
    the last), nor looks again after the last step: nothing rang and its
    last take was not full. Two runs are counted, so that a take the first
    one left behind would fall in the second.
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
        # The first step finds the key unowned: it is queued, and the owner that
        # takes the key takes it from the store, then the later ones until none is left.
        warm_up = await app.submit("three_owned", {})
        assert await app.result(warm_up, timeout=PATIENCE) == 3
        await wait_until(looked_again, timeout=PATIENCE)
        taken_before = len(takes)
        before = _commits(app)
        for _ in range(2):
            task_id = await app.submit("three_owned", {})
            assert await app.result(task_id, timeout=PATIENCE) == 3
        took = _commits(app) - before
        assert len(takes) == taken_before, "the owner took the key's work from the store"
    assert took == 2 * TODAY, f"two lone {STEPS}-step workflows took {took} transactions"


async def test_a_step_a_sleep_and_a_step(app: App) -> None:
    """Step 1, a sleep, step 2: the sleep's write carries step 1's reply, as a step's start does.

    Until asleep, 3, as a lone two-step workflow takes until its second step
    starts: submit, claim with start 1, reply 1 with the sleep (its step
    recorded and the claim given up, `reply_then`). Woken (here by an
    operator, 1 of its own, as the clock stands still), 2 more: the claim with
    start 2, reply 2 with the finish. 5 in all, as a lone workflow of three
    plain steps takes: the sleep costs no transaction a step does not (before
    the claim rode with the first write, 7 against 6).
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
    assert (to_sleep, after_wake) == (3, 1 + 2), f"took {to_sleep} + {after_wake}"


def _signalled(app: App, gate: asyncio.Event) -> None:
    """`approve`: step 1 (held until `gate` is set), a wait for signal `go`, step 2."""

    @app.agent("held")
    async def held(request: Any) -> JsonValue:
        await gate.wait()
        return request.payload

    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("approve")
    async def approve(ctx: WorkflowContext, data: Any) -> JsonValue:
        first = await ctx.call("held", 1)
        got = await ctx.wait_for("go")
        return [first, got, await ctx.call("noop", 2)]


async def test_a_step_a_signal_already_sent_and_a_step(app: App) -> None:
    """Step 1, a wait whose signal was sent before it, step 2: 5, the signal's own write among them.

    Submit, claim with start 1, the signal (sent while step 1 runs), then the
    wait reads its inbox (a read, no write) and goes on with the signal: reply
    1, the signal consumed into the wait's step and start 2 ride in one
    transaction (`reply_then` with `waits`), reply 2 with the finish. A lone
    two-step workflow takes 4: the wait adds only the signal's own write, made
    by its sender, as a reply from another process is (6 when the wait
    consumed it in a transaction of its own).
    """
    gate = asyncio.Event()
    _signalled(app, gate)

    async def running(task_id: str) -> bool:
        return [s.state for s in (await app.get_task(task_id)).steps] == [StepState.RUNNING]

    async with app.running(["scheduler", "agent"]):
        for _ in range(2):  # the first run warms the roles up
            gate.clear()
            before = _commits(app)
            task_id = await app.submit("approve", {})
            await wait_until(functools.partial(running, task_id), timeout=PATIENCE)
            await app.signal(task_id, "go", "yes")  # alone: step 1 waits for the gate
            gate.set()
            assert await app.result(task_id, timeout=PATIENCE) == [1, "yes", 2]
            took = _commits(app) - before
    assert took == 1 + 1 + 1 + 1 + 1, f"took {took}"


async def test_a_step_a_wait_the_signal_later_and_a_step(app: App) -> None:
    """Step 1, a wait, then the signal, step 2: as a sleep woken by an operator, (3, 1 + 2).

    Until waiting, 3: submit, claim with start 1, reply 1 with the wait (its
    step recorded and the claim given up, `reply_then`). The signal's write
    consumes it into the waiting step and makes the task due; then 2: the
    claim with start 2 (the replayed wait reads its recorded payload: no
    write), reply 2 with the finish. 6 in all, a plain three-step workflow's
    5 and the signal's own write (made by its sender).
    """
    gate = asyncio.Event()
    gate.set()
    _signalled(app, gate)

    async def waiting(task_id: str) -> bool:
        task = await app.get_task(task_id)
        return task.process_state is ProcessState.PENDING and len(task.steps) == 2

    async with app.running(["scheduler", "agent"]):
        for _ in range(2):  # the first run warms the roles up
            before = _commits(app)
            task_id = await app.submit("approve", {})
            await wait_until(functools.partial(waiting, task_id), timeout=PATIENCE)
            to_wait = _commits(app) - before
            await app.signal(task_id, "go", "later")
            assert await app.result(task_id, timeout=PATIENCE) == [1, "later", 2]
            after_signal = _commits(app) - before - to_wait
    assert (to_wait, after_signal) == (3, 1 + 2), f"took {to_wait} + {after_signal}"


async def test_a_parent_with_one_child_of_one_step(app: App) -> None:
    """A parent awaiting one child that runs one step: 5 transactions in all.

    The parent: submit, then its claim with the child's start and its own
    wait (the step, the child task and its link, the claim given up: one
    `start_child`). The child: its claim with its step's start, its reply
    riding its end, which also records the parent's step and wakes the parent
    (`end_child` in `reply_then`). The parent again: its claim with its
    finish. Against a lone one-step workflow (3), the child costs what a task
    of its own costs less its submit (2): its result adds no transaction.
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
    assert took == 5, f"a parent with one child of one step took {took} transactions"
