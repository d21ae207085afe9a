"""A process that runs a scheduler and agents hands each step's request straight to
its agent worker (taken in the transaction that starts the step) and records each
reply in the reply's own transaction: no request or reply waits in a queue.

Where the scheduler runs elsewhere (an agent-only process) requests and replies
are queued as before, and the task still ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd import App, ProcessState, WorkflowContext

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

PATIENCE = 15.0


def _three_steps(app: App) -> None:
    @app.agent("noop")
    async def noop(request: Any) -> JsonValue:
        return request.payload

    @app.workflow("three")
    async def three(ctx: WorkflowContext, data: Any) -> JsonValue:
        total = 0
        for i in range(3):
            total += await ctx.call("noop", i)
        return total


def _spy_on_queued_replies(app: App) -> list[int]:
    """Count the replies the scheduler's reply loop finds queued."""
    found: list[int] = []
    record_replies = app.store.record_replies

    async def spy(*, locked_by: str, limit: int) -> Any:
        taken = await record_replies(locked_by=locked_by, limit=limit)
        found.extend(reply.seq for reply, _ in taken)
        return taken

    app.store.record_replies = spy
    return found


def _spy_on_taken_requests(app: App) -> list[int]:
    """Count the requests agent workers take from the queue."""
    found: list[int] = []
    take_requests = app.store.take_requests

    async def spy(**kwargs: Any) -> Any:
        taken = await take_requests(**kwargs)
        found.extend(request.seq for request in taken)
        return taken

    app.store.take_requests = spy
    return found


async def test_requests_and_replies_within_one_process_are_never_queued(app: App) -> None:
    _three_steps(app)
    queued = _spy_on_queued_replies(app)
    taken = _spy_on_taken_requests(app)

    async with app.running():
        ids = [await app.submit("three", {"n": n}) for n in range(5)]
        results = [await app.result(task_id, timeout=PATIENCE) for task_id in ids]

    assert results == [3] * 5
    assert queued == [], "a reply went through the queue although its scheduler is local"
    assert taken == [], "a request went through the queue although its agent is local"
    for task_id in ids:
        kinds = [e.kind for e in await app.history(task_id)]
        assert kinds.count("step_completed") == 3


async def test_requests_and_replies_between_processes_are_queued(app: App, store_url: str) -> None:
    _three_steps(app)
    queued = _spy_on_queued_replies(app)
    agents = App(store_url, poll_interval=0.05, sqlite_synchronous="NORMAL")
    _three_steps(agents)
    taken = _spy_on_taken_requests(agents)
    try:
        async with app.running(["scheduler", "supervisor"]), agents.running(["agent"]):
            task_id = await app.submit("three", {})
            assert await app.result(task_id, timeout=PATIENCE) == 3
    finally:
        await agents.close()

    assert sorted(queued) == [1, 2, 3]
    assert sorted(taken) == [1, 2, 3]
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PROCESSED
