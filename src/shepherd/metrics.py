"""Counters kept in memory per process, one registry per App.

They are prometheus-client counters, so exporting them in Prometheus' text format
is one call (`prometheus_client.generate_latest(app.metrics.registry)`); each App
has its own registry, so several Apps (and tests) in one process never collide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from prometheus_client import CollectorRegistry, Counter

if TYPE_CHECKING:
    from prometheus_client.metrics import Counter as LabelledCounter

__all__ = ["AgentCounters", "Metrics"]


@final
class Metrics:
    """The counters of one App.

    Attributes:
        calls: Handler invocations, per agent (every try counts, retries included).
        retries: Tries after a transient failure, per agent.
        timeouts: Handlers cancelled at `complete_by`, per agent.
        failures: Failed handler tries, per agent and kind (transient, permanent, or bug:
            an unexpected exception).
        breaker_transitions: Breaker state changes this process made, per service
            and change (`closed->open`, `open->half_open`, `half_open->closed`, ...).
        breaker_waits: Tries held back because a breaker was open, per service.
        loop_blocks: Episodes of the event loop blocked longer than `block_warning`
            (counted by the watchdog when it warns, while the loop is still blocked).
        threads_overdue: Handler threads of `threads=True` agents still running at
            their `complete_by` (each keeps its slot until it returns), per agent.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "shepherd_agent_calls", "Handler invocations.", ["agent"], registry=self.registry
        )
        self.retries = Counter(
            "shepherd_agent_retries",
            "Tries after a transient failure.",
            ["agent"],
            registry=self.registry,
        )
        self.timeouts = Counter(
            "shepherd_agent_timeouts",
            "Handlers cancelled at complete_by.",
            ["agent"],
            registry=self.registry,
        )
        self.failures = Counter(
            "shepherd_agent_failures",
            "Failed handler tries, by kind (transient, permanent or bug).",
            ["agent", "kind"],
            registry=self.registry,
        )
        self.breaker_transitions = Counter(
            "shepherd_breaker_transitions",
            "Circuit breaker state changes made by this process.",
            ["service", "change"],
            registry=self.registry,
        )
        self.breaker_waits = Counter(
            "shepherd_breaker_waits",
            "Tries held back because the service's breaker was open.",
            ["service"],
            registry=self.registry,
        )
        self.loop_blocks = Counter(
            "shepherd_loop_blocks",
            "Episodes of the event loop blocked longer than block_warning.",
            registry=self.registry,
        )
        self.threads_overdue = Counter(
            "shepherd_agent_threads_overdue",
            "Handler threads still running at complete_by (they keep their slot).",
            ["agent"],
            registry=self.registry,
        )

    def snapshot(self) -> dict[str, float]:
        """Every counter's current value, keyed `name{label=value,...}`."""
        out: dict[str, float] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = sample.value
        return out

    def value(self, name: str, **labels: str) -> float:
        """One counter's value (0 if it was never incremented), e.g. `value("calls", agent="x")`."""
        counter = getattr(self, name, None)
        if not isinstance(counter, Counter):
            raise ValueError(f"no counter named {name!r}")
        for family in counter.collect():
            for sample in family.samples:
                if sample.name.endswith("_total") and sample.labels == labels:
                    return float(sample.value)
        return 0.0


@final
@dataclass(frozen=True, slots=True)
class AgentCounters:
    """One agent's counters, their labels bound once (the hot path only increments)."""

    calls: LabelledCounter
    retries: LabelledCounter
    timeouts: LabelledCounter
    transient: LabelledCounter
    permanent: LabelledCounter
    bug: LabelledCounter

    @classmethod
    def of(cls, metrics: Metrics, agent: str) -> AgentCounters:
        return cls(
            calls=metrics.calls.labels(agent=agent),
            retries=metrics.retries.labels(agent=agent),
            timeouts=metrics.timeouts.labels(agent=agent),
            transient=metrics.failures.labels(agent=agent, kind="transient"),
            permanent=metrics.failures.labels(agent=agent, kind="permanent"),
            bug=metrics.failures.labels(agent=agent, kind="bug"),
        )
