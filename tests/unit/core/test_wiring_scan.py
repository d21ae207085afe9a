from __future__ import annotations

from textwrap import dedent

from shepherd.core.wiring import AgentCall, agent_calls


def _names(source: str, function: str = "flow", **kwargs: str) -> list[str] | None:
    calls = agent_calls(dedent(source), function=function, **kwargs)
    return None if calls is None else [("undo:" if c.undo else "") + c.agent for c in calls]


def test_a_literal_call_is_found_with_its_line() -> None:
    source = dedent(
        """\
        @app.workflow("orders.process")
        async def flow(ctx, order):
            stock = await ctx.call("inventory.reserve", order)
            return stock
        """
    )
    assert agent_calls(source, function="flow") == (AgentCall(agent="inventory.reserve", line=3),)


def test_agent_and_undo_given_as_keywords_are_found() -> None:
    source = """\
        async def flow(ctx, order):
            await ctx.call("payments.charge", order, within=10, undo="payments.refund")
            await ctx.call(agent="shipping.create", payload=order)
        """
    assert _names(source) == ["payments.charge", "undo:payments.refund", "shipping.create"]


def test_names_that_are_not_literals_are_skipped() -> None:
    source = """\
        async def flow(ctx, order):
            name = "inventory.reserve"
            await ctx.call(name, order, undo=order["undo"])
            await ctx.call(f"payments.{order['kind']}", undo=None)
            await ctx.call("shipping." + "create")
            await ctx.call(*order["call"])
            await ctx.call(**order["call"])
            await ctx.call(agent=name)
        """
    assert _names(source) == []


def test_calls_in_branches_loops_and_nested_functions_are_found() -> None:
    source = """\
        async def flow(ctx, order):
            if order["express"]:
                await ctx.call("shipping.express")
            else:
                for item in order["items"]:
                    await ctx.call("inventory.reserve", item)

            async def pay():
                return await ctx.call("payments.charge", order)

            refund = lambda: ctx.call("payments.refund")
            return await pay(), refund
        """
    assert _names(source) == [
        "shipping.express",
        "inventory.reserve",
        "payments.charge",
        "payments.refund",
    ]


def test_the_context_is_the_first_parameter_whatever_its_name() -> None:
    source = """\
        async def flow(workflow, order, ctx=None):
            await workflow.call("inventory.reserve")
            await ctx.call("not.the.context")
        """
    assert _names(source) == ["inventory.reserve"]


def test_the_context_name_can_be_given() -> None:
    source = """\
        async def flow(self, context, order):
            await context.call("inventory.reserve")
            await self.call("not.the.context")
        """
    assert _names(source, context="context") == ["inventory.reserve"]


def test_other_calls_are_not_agent_calls() -> None:
    source = """\
        async def flow(ctx, order):
            await other.call("a")
            await ctx.submit("b")
            await ctx.inner.call("c")
            await call("d")
            await ctx.call()
        """
    assert _names(source) == []


def test_decorators_are_not_scanned() -> None:
    source = """\
        @app.workflow("flow", agents=["declared"])
        @ctx.call("not.a.step")
        async def flow(ctx, order):
            pass
        """
    assert _names(source) == []


def test_the_source_of_a_nested_function_is_indented() -> None:
    source = (
        "    @app.workflow('flow')\n"
        "    def flow(ctx, order):\n"
        '        """A docstring\n'
        'with a line at column 0."""\n'
        "        return ctx.call('inventory.reserve')\n"
    )
    assert agent_calls(source, function="flow") == (AgentCall(agent="inventory.reserve", line=5),)


def test_the_named_function_is_the_one_scanned() -> None:
    source = """\
        def helper(ctx):
            return ctx.call("in.helper")

        async def flow(ctx, order):
            return await ctx.call("in.flow")
        """
    assert _names(source) == ["in.flow"]
    assert _names(source, function="missing") is None


def test_a_lambda_is_scanned_when_it_is_the_only_one() -> None:
    one = 'app.workflow("flow")(lambda ctx, data: ctx.call("inventory.reserve"))\n'
    two = "f, g = (lambda ctx: ctx.call('a')), (lambda ctx: ctx.call('b'))\n"
    assert _names(one, function="<lambda>") == ["inventory.reserve"]
    assert _names(two, function="<lambda>") is None


def test_a_function_without_positional_parameters_calls_nothing_known() -> None:
    assert _names("async def flow(*args):\n    await args[0].call('a')\n") == []


def test_source_that_does_not_parse_is_unknown() -> None:
    assert _names("async def flow(ctx, order:\n") is None
    assert _names("def flow(ctx):\n    return 1\x00\n") is None
