"""An app whose task ends in `error` with a traceback: the dashboard's tests of fixing a task.

`orders.pay` reserves (an undo agent releases), then charges; `charge` has a
bug when the payload has no `card` (a KeyError a few frames deep, so that its
traceback is long), tried twice at once before it is replied as a bug. A
retry of step 2 with a card completes the task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd import ProcessState, RetryPolicy
from shepherd.testing import wait_until

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

__all__ = ["PATIENCE", "TOKEN", "failed_task", "register", "state_is"]

TOKEN = "the-shared-dashboard-token"
PATIENCE = 15.0
#: The agent `charge` tries twice, at once, before its bug is replied.
TWICE = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.001)


def register(app: App) -> None:
    """`orders.pay`: `reserve` (undone by `release`), then `charge`, whose bug is a missing card."""

    @app.agent("reserve")
    async def reserve(request: AgentRequest) -> JsonValue:
        return {"reserved": request.payload}

    @app.agent("release")
    async def release(request: AgentRequest) -> JsonValue:
        return None

    def card(payload: Any, depth: int) -> JsonValue:
        # A few frames deep: the traceback is longer than the lines shown before its expander.
        return card(payload, depth - 1) if depth else {"charged": payload["card"]}

    @app.agent("charge", retry=TWICE)
    async def charge(request: AgentRequest) -> JsonValue:
        return card(request.payload, 6)

    @app.workflow("orders.pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("reserve", data, undo="release")
        return await ctx.call("charge", data)


async def failed_task(app: App, payload: JsonValue) -> str:
    """A task of `orders.pay` that ends in `error` (its charge has no card); its id."""
    task_id = await app.submit("orders.pay", payload)

    async def in_error() -> bool:
        return (await app.get_task(task_id)).process_state is ProcessState.ERROR

    await wait_until(in_error, timeout=PATIENCE)
    return task_id


async def state_is(app: App, task_id: str, state: ProcessState) -> bool:
    """Whether the task is in `state` now."""
    return (await app.get_task(task_id)).process_state is state
