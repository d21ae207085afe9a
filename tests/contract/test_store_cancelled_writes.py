"""Callers that give up: a write whose caller is cancelled changes nothing for anyone else.

A cancelled caller's operation may already be in a batch that is committing;
it then commits or not, at most once, and the store goes on: the other
callers of that batch get their outcomes and later writes work.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store, Submitted


async def test_callers_cancelled_while_their_writes_wait_or_commit_leave_the_others_whole(
    store: Store,
) -> None:
    asked = 0
    all_asked = asyncio.Event()

    async def submit(n: int) -> Submitted:
        nonlocal asked
        asked += 1
        if asked == 20:
            all_asked.set()
        return await store.submit_task(new_task("wf", n))

    callers = [asyncio.create_task(submit(n)) for n in range(20)]
    # Every caller has handed its write to the store, whose batch is starting:
    # none can have its outcome before this test resumes.
    await all_asked.wait()
    for caller in callers[::2]:
        caller.cancel()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)

    cancelled, kept = outcomes[::2], outcomes[1::2]
    assert all(isinstance(o, asyncio.CancelledError) for o in cancelled)
    submitted = [o for o in kept if not isinstance(o, BaseException)]
    assert len(submitted) == len(kept)
    after = await store.submit_task(new_task("wf", "after"))
    stored = await store.list_tasks(limit=100)
    assert {s.task_id for s in [*submitted, after]} <= {task.id for task in stored}
    inputs = [task.input for task in stored if task.input != "after"]
    # Each cancelled write committed at most once; every other one exactly once.
    assert len(inputs) == len(set(inputs))
    assert set(range(1, 20, 2)) <= set(inputs)
