"""`App.check`: every agent a workflow calls, as read from its source or declared, is registered."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from shepherd import App, ConfigError, WorkflowContext
from shepherd.core.records import JsonValue
from shepherd.scheduler.wiring import called_agents, missing_agents

#: The project's directory, under which this file is `tests/unit/test_app_check.py`.
ROOT = Path(__file__).resolve().parents[2]

Flow = Callable[[WorkflowContext, Any], Awaitable[JsonValue]]


def _app() -> App:
    app = App("sqlite:///never-opened.db")

    @app.agent("inventory.reserve")
    async def reserve(request: object) -> JsonValue:
        return None

    return app


def test_an_app_whose_agents_are_all_registered_passes() -> None:
    app = _app()

    @app.agent("inventory.release")
    async def release(request: object) -> JsonValue:
        return None

    @app.workflow("orders.process")
    async def process(ctx: WorkflowContext, order: Any) -> JsonValue:
        return await ctx.call("inventory.reserve", order, undo="inventory.release")

    app.check()


def test_missing_agents_are_named_with_their_workflow_and_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)  # the place is shown relative to the working directory
    app = _app()

    @app.workflow("orders.process")
    async def process(ctx: WorkflowContext, order: Any) -> JsonValue:
        await ctx.call("inventory.reserve", order, undo="inventory.release")
        await ctx.call("inventory.reserve", order)
        return await ctx.call("shipping.create", order)

    @app.workflow("orders.audit")
    async def audit(ctx: WorkflowContext, order: Any) -> JsonValue:
        return await ctx.call("audit.write", order)

    with pytest.raises(ConfigError) as caught:
        app.check()
    first = process.__code__.co_firstlineno
    here = "tests/unit/test_app_check.py"
    assert caught.value.field == "app"
    assert caught.value.message == (
        "incomplete app: workflow 'orders.process' calls agents that are not registered:"
        f" 'inventory.release' (undo, {here}:{first + 2}), 'shipping.create' ({here}:{first + 4});"
        f" workflow 'orders.audit' calls agents that are not registered: 'audit.write'"
        f" ({here}:{audit.__code__.co_firstlineno + 2}); register each with @app.agent"
        " (a scheduler calls only agents registered on its app, even those that run in other"
        " processes, e.g. `--roles agent`)"
    )


def test_declared_agents_are_checked_too() -> None:
    app = _app()

    @app.workflow("orders.process", agents=["inventory.reserve", "payments.charge"])
    async def process(ctx: WorkflowContext, order: Any) -> JsonValue:
        return await ctx.call(order["agent"], order)

    @app.workflow("orders.one", agents="payments.refund")
    async def one(ctx: WorkflowContext, order: Any) -> JsonValue:
        return None

    assert app.workflows["orders.process"].agents == ("inventory.reserve", "payments.charge")
    assert app.workflows["orders.one"].agents == ("payments.refund",)
    with pytest.raises(ConfigError) as caught:
        app.check()
    assert "workflow 'orders.process' calls agents that are not registered: " in str(caught.value)
    assert "'payments.charge' (agents=)" in str(caught.value)
    assert "'payments.refund' (agents=)" in str(caught.value)
    assert "inventory.reserve" not in str(caught.value)


@pytest.mark.parametrize("agents", [[""], ["ok", 3], ""])
def test_declared_agents_must_be_names(agents: Any) -> None:
    with pytest.raises(ConfigError, match="invalid setting 'agents': must be agent names"):
        _app().workflow("flow", agents=agents)


def test_a_name_found_and_declared_is_reported_once_where_it_is_called(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)

    async def flow(ctx: WorkflowContext, order: Any) -> JsonValue:
        return await ctx.call("shipping.create", order)

    found = called_agents(flow, ["shipping.create", "payments.charge"])
    assert [(a.agent, a.where.rsplit(":", 1)[0]) for a in found] == [
        ("shipping.create", "tests/unit/test_app_check.py"),
        ("payments.charge", "agents="),
    ]


def test_a_workflow_without_source_is_skipped_with_a_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = _app()
    scope: dict[str, Any] = {}
    exec("async def typed(ctx, order):\n    return await ctx.call('nowhere', order)\n", scope)
    app.workflow("typed")(scope["typed"])
    app.workflow("partial")(functools.partial(scope["typed"]))

    with caplog.at_level(logging.DEBUG, logger="shepherd.wiring"):
        app.check()
    assert [r.levelno for r in caplog.records] == [logging.DEBUG, logging.DEBUG]
    assert "cannot read the source of workflow function typed" in caplog.records[0].message
    assert "agents not checked" in caplog.records[1].message


def test_a_wrapped_workflow_is_read_through_its_wrapper() -> None:
    def traced(fn: Flow) -> Flow:
        @functools.wraps(fn)
        async def wrapper(ctx: WorkflowContext, data: Any) -> JsonValue:
            return await fn(ctx, data)

        return wrapper

    @traced
    async def flow(context: WorkflowContext, order: Any) -> JsonValue:
        return await context.call("payments.charge", order)

    (problem,) = missing_agents(
        [_Spec(name="flow", fn=flow, agents=())], agents={"inventory.reserve"}
    )
    assert [a.agent for a in problem.agents] == ["payments.charge"]


class _Spec:
    def __init__(self, *, name: str, fn: Callable[..., Any], agents: tuple[str, ...]) -> None:
        self.name, self.fn, self.agents = name, fn, agents
