"""The app's wiring, checked before a scheduler starts: every agent a workflow calls is registered.

The agents a workflow calls are those written as literals in its source
(`core.wiring`) and those it declares with `@app.workflow(..., agents=[...])`.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, final

from shepherd.core.wiring import AgentCall, agent_calls
from shepherd.errors import ConfigError

log = logging.getLogger("shepherd.wiring")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Unregistered:
    """An agent a workflow calls that is not registered, and where it is called."""

    agent: str
    #: `file:line` of the call, or "agents=" for a declared name.
    where: str
    undo: bool = False

    def __str__(self) -> str:
        role = "undo, " if self.undo else ""
        return f"{self.agent!r} ({role}{self.where})"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class MissingAgents:
    """A workflow that calls agents no `@app.agent` registers."""

    workflow: str
    agents: tuple[Unregistered, ...]

    def __str__(self) -> str:
        names = ", ".join(str(a) for a in self.agents)
        return f"workflow {self.workflow!r} calls agents that are not registered: {names}"


def declared_agents(agents: Iterable[str]) -> tuple[str, ...]:
    """A workflow's `agents=` as a tuple of names (one str is one name).

    Raises:
        ConfigError: A name is not a non-empty str.
    """
    if isinstance(agents, str):
        return (agents,) if agents else declared_agents([agents])
    names = tuple(agents)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError("agents", f"must be agent names (non-empty str), not {name!r}")
    return names


def called_agents(fn: Callable[..., Any], declared: Iterable[str] = ()) -> list[Unregistered]:
    """The agents `fn` calls with a literal name, then those `declared`, each once.

    Every name is returned as if it were unregistered: the caller filters. A
    function whose source cannot be read (defined in a REPL or by `exec`) or
    parsed contributes only its declared names.
    """
    found: list[Unregistered] = []
    seen: set[str] = set()
    for call, where in _scan(fn):
        if call.agent not in seen:
            seen.add(call.agent)
            found.append(Unregistered(agent=call.agent, where=where, undo=call.undo))
    for name in declared:
        if name not in seen:
            seen.add(name)
            found.append(Unregistered(agent=name, where="agents="))
    return found


class WorkflowSpec(Protocol):
    """What the check reads of a registered workflow (`app.Workflow`)."""

    @property
    def name(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any]: ...

    @property
    def agents(self) -> tuple[str, ...]: ...


def missing_agents(
    workflows: Iterable[WorkflowSpec], agents: Collection[str]
) -> list[MissingAgents]:
    """For each workflow, the agents it calls (or declares) that are not in `agents`.

    The rule is the scheduler's: `ctx.call` accepts an agent (or an `undo`) only
    if it is registered on the app that runs the workflow.
    """
    problems = []
    for spec in workflows:
        called = called_agents(spec.fn, spec.agents)
        missing = tuple(a for a in called if a.agent not in agents)
        if missing:
            problems.append(MissingAgents(workflow=spec.name, agents=missing))
    return problems


#: Why an exclusive agent cannot be an undo agent yet.
EXCLUSIVE_UNDO = (
    "an exclusive agent cannot undo a step yet (an undo's payload, the forward step's "
    "request and result, gives no owning key of its own); undo with an agent that is "
    "not exclusive"
)


def exclusive_undos(workflows: Iterable[WorkflowSpec], exclusive: Collection[str]) -> list[str]:
    """For each literal `undo=` naming one of the `exclusive` agents: what is wrong, and where."""
    found: list[str] = []
    if not exclusive:  # nothing to look for: the sources are not read twice
        return found
    for spec in workflows:
        for call, where in _scan(spec.fn):
            if call.undo and call.agent in exclusive:
                found.append(
                    f"workflow {spec.name!r} names exclusive agent {call.agent!r} as an undo "
                    f"({where}): {EXCLUSIVE_UNDO}"
                )
    return found


def describe(problems: Iterable[MissingAgents]) -> str:
    """One message for all the problems, with the remedy."""
    return (
        "; ".join(str(p) for p in problems)
        + "; register each with @app.agent (a scheduler calls only agents registered on its"
        " app, even those that run in other processes, e.g. `--roles agent`)"
    )


def _scan(fn: Callable[..., Any]) -> list[tuple[AgentCall, str]]:
    """The literal agent calls of `fn`, each with its `file:line`; none when unreadable."""
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        lines, first = inspect.getsourcelines(fn)
        path = inspect.getsourcefile(fn) or "?"
        context = next(iter(inspect.signature(fn).parameters), None)
    except (OSError, TypeError, ValueError) as exc:
        log.debug(
            "cannot read the source of workflow function %s (%s): agents not checked", name, exc
        )
        return []
    calls = agent_calls("".join(lines), function=getattr(fn, "__name__", ""), context=context)
    if calls is None:
        log.debug("cannot parse the source of workflow function %s: agents not checked", name)
        return []
    where = _shown(path)
    return [(c, f"{where}:{c.line + first - 1}") for c in calls]


def _shown(path: str) -> str:
    """`path` relative to the working directory when it lies under it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive, on Windows
        return path
    return path if relative.startswith(os.pardir) else relative
