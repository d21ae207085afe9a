"""Pools per service: which of the registered agents one process serves.

A process started with `agents=["payments.*"]` (`--agents "payments.*"`)
runs the handlers of the matching agents only, so an operator sizes a pool of
processes for each remote service. Patterns are shell globs (`fnmatch`, case
sensitive); an agent is served if any pattern matches its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from shepherd.errors import ConfigError

__all__ = ["check_pool", "parse_patterns", "pool_agents"]


def parse_patterns(text: str) -> tuple[str, ...]:
    """`payments.*, email.send` -> the patterns, stripped, without repeats, in order.

    Raises:
        ConfigError: No pattern is named (an empty text, or only commas).
    """
    named = [part.strip() for part in text.split(",")]
    patterns = tuple(dict.fromkeys(p for p in named if p))
    if not patterns:
        raise ConfigError("agents", "name at least one agent or glob pattern (payments.*)")
    return patterns


def pool_agents(registered: Iterable[str], patterns: Sequence[str]) -> tuple[str, ...]:
    """The registered agents that any of `patterns` matches, sorted by name.

    Raises:
        ConfigError: No pattern is given, a pattern is empty, or a pattern matches
            no registered agent (a typo would leave its service without a pool);
            the message names the pattern and lists the registered agents.
    """
    names = sorted(set(registered))
    if isinstance(patterns, str):  # a lone "payments.*" would be read letter by letter
        patterns = (patterns,)
    if not patterns:
        raise ConfigError("agents", "name at least one agent or glob pattern (payments.*)")
    served: set[str] = set()
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ConfigError("agents", f"{pattern!r} is not an agent name or glob pattern")
        matched = [name for name in names if fnmatchcase(name, pattern)]
        if not matched:
            known = ", ".join(names) if names else "none"
            raise ConfigError(
                "agents", f"pattern {pattern!r} matches no registered agent (registered: {known})"
            )
        served.update(matched)
    return tuple(sorted(served))


def check_pool(
    roles: Sequence[str], patterns: Sequence[str] | None, registered: Iterable[str]
) -> tuple[str, ...] | None:
    """The agents a process running `roles` serves: all (None) without patterns, else the pool.

    Raises:
        ConfigError: Patterns are given but the roles lack the agent role, or
            `pool_agents` refuses them.
    """
    if patterns is None:
        return None
    if "agent" not in roles:
        raise ConfigError(
            "agents",
            f"choosing agents needs the agent role, and the roles are {', '.join(roles)} "
            "(add agent to the roles, or drop the agents)",
        )
    return pool_agents(registered, patterns)
