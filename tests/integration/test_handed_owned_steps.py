"""Steps handed to their key's owner as they start, with a second scheduler queueing the same keys.

Two apps share one store: the first runs a scheduler and the agent role (it
owns the keys of the exclusive agent), the second a scheduler alone. The
first's steps to a key it owns are handed to the key's loop as they start
(taken by its worker behind the owner's fence); the second's are queued, and
the owner takes them from the store. Whatever the mix, a key's requests are
handled one at a time, each once, in the order they were queued (when one is
handled, none of its key's requests queued before it still waits).
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App, Submission
from shepherd.agents.helpers import source_of
from shepherd.core.states import ProcessState
from shepherd.governance.handing import Handing
from shepherd.testing import wait_until
from support.owned_steps_worker import Earlier

if TYPE_CHECKING:
    from shepherd import AgentRequest
    from shepherd.core.records import JsonValue, Request

PATIENCE = 60.0
USERS = ["user-0", "user-1"]
TASKS = 40


def _app(store_url: str) -> App:
    return App(
        store_url,
        poll_interval=0.05,
        idle_poll_max=0.2,
        owner_lease=5.0,
        # A few tasks at a time each: both schedulers run some.
        max_in_flight=4,
        claim_batch=4,
        sqlite_synchronous="NORMAL",
    )


def _workflow(app: App) -> None:
    @app.workflow("order")
    async def order(ctx: Any, data: Any) -> Any:
        first = await ctx.call("ledger", {**data, "s": 1})
        second = await ctx.call("ledger", {**data, "s": 2})
        return [first, second]


async def test_steps_of_a_key_from_two_schedulers_stay_in_order_with_handing_on(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[int] = []
    hand = Handing.hand

    def counting(self: Handing, agent: str, key: str, request: Request, *, epoch: int) -> None:
        handed.append(request.id)
        hand(self, agent, key, request, epoch=epoch)

    monkeypatch.setattr(Handing, "hand", counting)
    earlier = Earlier(store_url)
    handled: Counter[tuple[str, int]] = Counter()
    in_flight: dict[str, int] = defaultdict(int)
    out_of_order: list[tuple[str, int, int]] = []
    most = 0

    owner, other = _app(store_url), _app(store_url)
    took: list[int] = []  # per take of a key's work: the steps it took (queued ones)
    take_key_work = owner.store.take_key_work

    async def spy(*args: Any, **kwargs: Any) -> Any:
        steps, calls, given_up = await take_key_work(*args, **kwargs)
        took.append(len(steps))
        return steps, calls, given_up

    owner.store.take_key_work = spy

    @owner.agent("ledger", exclusive_by="user", within=30.0)
    async def ledger(request: AgentRequest) -> JsonValue:
        nonlocal most
        key = str(request.owner_key)
        in_flight[key] += 1
        most = max(most, in_flight[key])
        queue_id = source_of(request).id
        waiting = earlier.count("ledger", key, queue_id)
        if waiting:
            out_of_order.append((key, queue_id, waiting))
        await asyncio.sleep(0.001)  # another handling of the key would overlap this one
        handled[(request.task_id, request.payload["s"])] += 1
        in_flight[key] -= 1
        return request.payload["s"]

    other.agent("ledger", exclusive_by="user", within=30.0)(ledger)
    _workflow(owner)
    _workflow(other)
    started_elsewhere: list[int] = []  # the other scheduler's step starts (it runs no agent)
    start_step = other.store.start_step

    async def starting(start: Any) -> Any:
        started_elsewhere.append(start.seq)
        return await start_step(start)

    other.store.start_step = starting  # type: ignore[method-assign]
    try:
        async with owner, other, owner.running(["scheduler", "agent"]):
            ids = await owner.submit_many(
                [Submission("order", {"user": USERS[n % 2], "n": n}) for n in range(TASKS)]
            )
            # Alone, the owner's scheduler hands its steps to the keys' loops; then the
            # other scheduler queues steps of the same keys meanwhile.
            await wait_until(lambda: len(handed) >= 4, timeout=PATIENCE, message="none handed")
            async with other.running(["scheduler"]):
                results = [await owner.result(i, timeout=PATIENCE) for i in ids]
            tasks = await asyncio.gather(*(owner.store.get_task(i) for i in ids))
    finally:
        earlier.conn.close()

    assert results == [[1, 2]] * TASKS
    assert most == 1, "two handlings of one key overlapped"
    assert out_of_order == [], "a request was handled before one of its key queued earlier"
    assert sorted(handled.values()) == [1] * (2 * TASKS), "a step was handled twice"
    # Both ways ran: steps handed as they started, and steps queued and taken.
    assert handed, "no step was handed to its owner as it started"
    assert sum(took) > 0, "no step was taken from the store"
    assert all(t is not None and t.process_state is ProcessState.PROCESSED for t in tasks)
    assert all(t is not None and t.failure_count == 0 for t in tasks)
