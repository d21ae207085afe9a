"""What registration checks: names, an agent's options, a workflow's wiring, a call's plan.

`Registrations` (`shepherd.registration`) and the App call these; each refuses
with an error that names what was wrong, before anything is stored or sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from shepherd.agents import Agent
from shepherd.agents.batch import Batch
from shepherd.core.calls import owner_key_of
from shepherd.core.limits import NAME_BYTES, too_long
from shepherd.errors import (
    ConfigError,
    IncompleteAppError,
    OwnerKeyError,
    TooLongError,
    UnknownAgentError,
)
from shepherd.scheduler import Workflow
from shepherd.scheduler.wiring import describe, exclusive_undos, missing_agents

if TYPE_CHECKING:
    from shepherd.config import Settings
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.records import JsonValue

__all__ = [
    "CallPlan",
    "call_plan",
    "check_options",
    "check_shared_breaker",
    "check_wiring",
    "checked_name",
]


def check_wiring(workflows: Iterable[Workflow], agents: Mapping[str, Agent]) -> None:
    """Check that every agent the workflows call is registered (see `Registrations.check`).

    Raises:
        IncompleteAppError: Agents are missing; the message names each one, where
            it is called, and the workflow that calls it.
        ConfigError: A workflow names an exclusive agent as an undo (not
            supported yet); the message names the agent, the workflow and why.
    """
    problems = missing_agents(workflows, agents)
    if problems:
        raise IncompleteAppError(describe(problems))
    exclusive = {name for name, spec in agents.items() if spec.exclusive_by is not None}
    undos = exclusive_undos(workflows, exclusive)
    if undos:
        raise ConfigError("undo", "; ".join(undos))


def check_options(
    agent: object,
    *,
    breaker: BreakerPolicy | None,
    service: str | None,
    exclusive_by: object,
    batch: object,
) -> None:
    """Refuse an agent's options that would be ignored together, naming the agent and why.

    Every other combination is built: `resource=`, `breaker=` and a resource's
    rate govern an exclusive agent's handlings (a batch is one handling),
    `threads=True` runs an exclusive or batching handler in a thread, and
    `resource=` with an entity that lives elsewhere is refused when called.

    Raises:
        ConfigError: `batch` is not a Batch, or is given without `exclusive_by`
            (only an owner gathers a key's calls); `service` is given without
            `breaker` (it names the breaker, and there is none).
    """
    if batch is not None and not isinstance(batch, Batch):
        raise ConfigError(
            "batch",
            f"agent {agent!r}: must be a Batch(max_items=..., max_delay=...), not {batch!r}",
        )
    if batch is not None and exclusive_by is None:
        raise ConfigError(
            "batch",
            f"agent {agent!r}: only an exclusive agent (exclusive_by=...) can batch its calls "
            "(an owner gathers one key's calls; other calls have nobody to gather them)",
        )
    if service is not None and breaker is None:
        raise ConfigError(
            "service",
            f"agent {agent!r}: service= names the circuit breaker the agent shares, and it "
            "has none; add breaker=BreakerPolicy(...) or drop service=",
        )


def check_shared_breaker(
    agents: Mapping[str, Agent], name: str, service: str, breaker: BreakerPolicy
) -> None:
    """Refuse a breaker policy other than the one another agent of `service` declared:
    the agents share one breaker, which each would open and close by its own rules.

    Raises:
        ConfigError: Names both agents, the service and the two policies.
    """
    for other in agents.values():
        if other.name == name or other.service_name != service:
            continue
        if other.breaker is not None and other.breaker != breaker:
            raise ConfigError(
                "breaker",
                f"agent {name!r}: service {service!r} shares one breaker with agent "
                f"{other.name!r}, declared with another policy ({other.breaker} there, "
                f"{breaker} here); give them the same BreakerPolicy",
            )


def checked_name(field: str, name: object) -> str:
    """`name` if it can name a workflow, an agent or a service (the store indexes it).

    Raises:
        ConfigError: It is not a non-empty str, or is longer than NAME_BYTES of
            UTF-8 (`shepherd.core.limits`), or holds a NUL or a lone surrogate.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(field, f"a {field}'s name is a non-empty str, not {name!r}")
    if (problem := too_long(f"{field} name", name, NAME_BYTES)) is not None:
        raise TooLongError(field, problem)
    if "\x00" in name or any(0xD800 <= ord(c) <= 0xDFFF for c in name):
        raise ConfigError(field, f"{name!r} holds a NUL or a lone surrogate")
    return name


class CallPlan(NamedTuple):
    """A call checked against its agent (`call_plan`): its window (`within`),
    its handlings (`attempts`), how long its caller waits, and its owning key, if any."""

    within: float
    attempts: int
    wait: float
    owner_key: str | None


def call_plan(
    agents: Mapping[str, Agent],
    agent: str,
    payload: JsonValue,
    within: float | None,
    attempts: int,
    timeout: float | None,
    settings: Settings,
    *,
    entity: object = None,
) -> CallPlan:
    """A call's window, its handlings, how long its caller waits, and its owning key
    (exclusive agents).

    The window is `within`, else the agent's, else `default_step_within`; the
    wait is `timeout`, else the window times `attempts` plus a second per attempt.

    Raises:
        UnknownAgentError: No agent of that name is registered.
        ConfigError: `within`, `attempts` or `timeout` is not positive, or
            `entity` is given and is not a str.
        OwnerKeyError: The agent is exclusive and the payload gives no owning key.
    """
    spec = agents.get(agent)
    if spec is None:
        raise UnknownAgentError(agent)
    if entity is not None and not isinstance(entity, str):
        raise ConfigError(
            "entity", f"call to agent {agent!r}: must be a str, not {type(entity).__name__}"
        )
    window = within if within is not None else spec.within or settings.default_step_within
    for name, value in (("within", window), ("attempts", attempts), ("timeout", timeout)):
        if value is not None and (isinstance(value, bool) or not value > 0):
            raise ConfigError(name, f"must be positive, not {value!r}")
    wait = timeout if timeout is not None else (window + 1.0) * attempts
    if spec.exclusive_by is None:
        return CallPlan(window, attempts, wait, None)
    found = owner_key_of(spec.exclusive_by, payload)
    if isinstance(found, ValueError):
        raise OwnerKeyError(agent, str(found))
    return CallPlan(window, attempts, wait, found)
