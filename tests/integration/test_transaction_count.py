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

from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, WorkflowContext

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

pytestmark = pytest.mark.fake_time

#: Real seconds the test waits for the result before it fails (a backstop).
PATIENCE = 15.0
STEPS = 3
#: Today's count: the submit, the claim, each step's start and its reply (3 x 2),
#: and the finish.
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


async def test_a_lone_three_step_workflow_takes_nine_transactions(app: App) -> None:
    """A lone workflow of three steps, all roles in one process: 9 commits today.

    Submit, claim, then for each step one transaction that starts it and one
    that records its reply, then the finish. Issue 34 sets the target at 6 or
    fewer (a step's reply and the next step's start, or the finish, in one
    transaction); when that lands this count goes down and so must `TODAY`.
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
