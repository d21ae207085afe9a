"""Which agents a workflow calls, read from its source text without running it.

A step is `await ctx.call("agent", payload, undo="agent")`. The names written
there as string literals are known before any task runs; names computed at run
time (a variable, an f-string, any other expression) are not, and are skipped.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import final

#: Put before an indented source (a nested function's) to parse it as a block.
_WRAPPER = "if True:\n"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentCall:
    """An agent name written as a literal in a `ctx.call`, called or as its `undo`."""

    agent: str
    #: 1-based line in the scanned source.
    line: int
    undo: bool = False


def agent_calls(
    source: str, *, function: str, context: str | None = None
) -> tuple[AgentCall, ...] | None:
    """The literal agent names of the `<context>.call(...)` calls in `function`.

    Args:
        source: Python source holding the definition of `function` (for example
            the text of that one function, indented or not).
        function: The function's name; `"<lambda>"` for the one lambda in `source`.
        context: The name under which the function receives its context (default:
            its first parameter).

    Returns:
        The calls, in source order: the agent given first or as `agent=`, and the
        one given as `undo=`, whenever it is a string literal. Calls anywhere in
        the function's body count, nested functions and untaken branches
        included. None when `source` does not parse or does not define `function`.
    """
    found = _function(source, function)
    if found is None:
        return None
    node, offset = found
    if context is None:
        positional = [*node.args.posonlyargs, *node.args.args]
        if not positional:
            return ()
        context = positional[0].arg
    body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else [*node.body]
    calls: list[AgentCall] = []
    for top in body:
        for sub in ast.walk(top):
            if isinstance(sub, ast.Call) and _is_call_on(sub, context):
                calls.extend(_names(sub, offset))
    return tuple(sorted(calls, key=lambda c: (c.line, c.undo)))


def _function(
    source: str, name: str
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, int] | None:
    """The definition of `name` in `source`, and how many lines to subtract from its lines."""
    tree = _parse(source)
    offset = 0
    if tree is None:
        # The source of a nested function or a method is indented: parse it as a block.
        tree, offset = _parse(_WRAPPER + source), 1
    if tree is None:
        return None
    if name == "<lambda>":
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        return (lambdas[0], offset) if len(lambdas) == 1 else None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node, offset
    return None


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL character, before Python 3.12
        return None


def _is_call_on(call: ast.Call, context: str) -> bool:
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "call"
        and isinstance(func.value, ast.Name)
        and func.value.id == context
    )


def _names(call: ast.Call, offset: int) -> list[AgentCall]:
    keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
    agent = call.args[0] if call.args else keywords.get("agent")
    line = call.lineno - offset
    names = []
    if (name := _literal(agent)) is not None:
        names.append(AgentCall(agent=name, line=line))
    if (undo := _literal(keywords.get("undo"))) is not None:
        names.append(AgentCall(agent=undo, line=line, undo=True))
    return names


def _literal(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
