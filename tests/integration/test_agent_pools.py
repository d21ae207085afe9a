"""Pools per service: an agent role started with `agents=[patterns]` runs only the matching agents.

Three Apps on one store stand for three processes: one runs the scheduler and
the supervisor, the other two each serve one pool. Every handler counts its
calls, so a pool that ran another pool's agent shows in the counts.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from shepherd import App
from shepherd.core.states import ProcessState, StepState
from shepherd.errors import ConfigError
from shepherd.testing import wait_until
from support.backends import sqlite_only

if TYPE_CHECKING:
    from shepherd.agents import AgentRequest
    from shepherd.core.workers import Worker

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 30.0
AGENTS = ("mail.send", "pay.charge", "pay.refund")


def register(app: App, calls: Counter[str]) -> App:
    """The agents `pay.charge`, `pay.refund` and `mail.send`, and a workflow for each service."""

    def counted(agent: str) -> Any:
        async def handler(request: AgentRequest) -> Any:
            calls[agent] += 1
            return {"agent": agent, "n": request.payload}

        return handler

    for name in AGENTS:
        app.agent(name)(counted(name))

    @app.workflow("pay")
    async def pay(ctx: Any, data: Any) -> Any:
        charged = await ctx.call("pay.charge", data)
        refunded = await ctx.call("pay.refund", data)
        return [charged["agent"], refunded["agent"]]

    @app.workflow("mail")
    async def mail(ctx: Any, data: Any) -> Any:
        sent = await ctx.call("mail.send", data)
        return [sent["agent"]]

    return app


def pool_process(store_url: str, calls: Counter[str]) -> App:
    """Another App on the same store, as another process would build it."""
    return register(App(store_url, alerts=(), poll_interval=0.05, lease_ttl=1.0), calls)


async def registered(app: App, instance: str) -> Worker:
    """The worker registry's row of `instance`, once it is there."""
    rows: dict[str, Worker] = {}

    async def listed() -> bool:
        rows.update((w.instance, w) for w in await app.store.list_workers())
        return instance in rows

    await wait_until(listed, timeout=PATIENCE, message=f"{instance} never registered")
    return rows[instance]


async def waiting_for_agent(app: App, task_id: str) -> bool:
    """Whether the task's latest step was sent to its agent and awaits a reply."""
    task = await app.get_task(task_id)
    return bool(task.steps) and task.steps[-1].state is StepState.RUNNING


async def test_a_pool_takes_only_the_requests_of_its_agents(app: App, store_url: str) -> None:
    calls: Counter[str] = Counter()
    register(app, calls)
    async with app.running(["scheduler", "supervisor"]):
        mails = [await app.submit("mail", i) for i in range(3)]
        pays = [await app.submit("pay", i) for i in range(3)]

        async def all_waiting() -> bool:
            return all([await waiting_for_agent(app, t) for t in mails + pays])

        # Every first request waits in the store before any pool runs.
        await wait_until(all_waiting, timeout=PATIENCE, message="a first request was never sent")

        payments = pool_process(store_url, calls)
        async with payments, payments.running(["agent"], agents=["pay.*"]):
            for task_id in pays:
                assert await app.result(task_id, timeout=PATIENCE) == [
                    "pay.charge",
                    "pay.refund",
                ]
            row = await registered(app, payments.instance)
            assert (row.roles, row.agents) == (("agent",), ("pay.charge", "pay.refund"))

        assert calls == {"pay.charge": 3, "pay.refund": 3}
        for task_id in mails:  # untouched: still waiting for a process that serves mail
            task = await app.get_task(task_id)
            assert task.process_state is ProcessState.PROCESSING
            (step,) = task.steps
            assert (step.agent, step.state, step.attempt) == ("mail.send", StepState.RUNNING, 1)

        email = pool_process(store_url, calls)
        async with email, email.running(["agent"], agents=["mail.send"]):
            for task_id in mails:
                assert await app.result(task_id, timeout=PATIENCE) == ["mail.send"]

    assert calls == {"pay.charge": 3, "pay.refund": 3, "mail.send": 3}


async def test_without_patterns_a_process_serves_every_agent(app: App) -> None:
    calls: Counter[str] = Counter()
    register(app, calls)
    async with app.running():
        pay = await app.submit("pay", 1)
        mail = await app.submit("mail", 2)
        assert await app.result(pay, timeout=PATIENCE) == ["pay.charge", "pay.refund"]
        assert await app.result(mail, timeout=PATIENCE) == ["mail.send"]
        (row,) = await app.store.list_workers()
        assert row.agents == AGENTS
    assert calls == {"pay.charge": 1, "pay.refund": 1, "mail.send": 1}


@pytest.mark.parametrize(
    ("roles", "agents", "says"),
    [
        (["agent"], ["payments.*"], "pattern 'payments.*' matches no registered agent "),
        (["agent"], ["pay.*", "mial.*"], "pattern 'mial.*' matches no registered agent "),
        (["agent"], [], "name at least one agent or glob pattern"),
        (["agent"], ["pay.*", " "], "' ' is not an agent name or glob pattern"),
        (["scheduler", "supervisor"], ["pay.*"], "choosing agents needs the agent role"),
    ],
)
@sqlite_only()
async def test_a_pool_that_would_serve_nothing_is_refused_before_the_store_is_touched(
    app: App, roles: list[str], agents: list[str], says: str
) -> None:
    register(app, Counter())
    with pytest.raises(ConfigError, match="agents") as raised:
        await app.run(roles, agents=agents)
    assert raised.value.field == "agents"
    assert says in raised.value.message
    if "matches no registered agent" in says:
        assert raised.value.message.endswith("(registered: mail.send, pay.charge, pay.refund)")
    with pytest.raises(ConfigError, match=re.escape(says)):
        async with app.running(roles, agents=agents):
            pytest.fail("the roles ran")
    await app.open()
    assert await app.store.list_workers() == []
    assert await app.list_tasks() == []
