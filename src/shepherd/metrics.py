"""Counters and histograms kept in memory per process, one registry per App.

They are prometheus-client metrics, so exporting them in Prometheus' text format
is one call (`prometheus_client.generate_latest(app.metrics.registry)`;
`shepherd.exposition.metrics_text` adds the store's gauges); each App has its
own registry, so several Apps (and tests) in one process never collide. The
roles bind each agent's or workflow's labels once (`AgentCounters`,
`WorkflowCounters`): a step costs an increment and a histogram observation,
never a store round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:
    from prometheus_client.metrics import Counter as LabelledCounter
    from prometheus_client.metrics import Histogram as LabelledHistogram

__all__ = ["DURATION_BUCKETS", "LAG_BUCKETS", "AgentCounters", "Metrics", "WorkflowCounters"]

#: Upper bounds (seconds) of the step duration buckets: a local call to a slow remote one.
DURATION_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
)  # fmt: skip
#: Upper bounds (seconds) of the claim lag buckets: from a wake-up to a backlog.
LAG_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0,
)  # fmt: skip


@final
class Metrics:
    """The counters and histograms of one App.

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
        step_duration: Seconds one try of a handler took (returned or raised), per
            agent: a step's latency as the remote service gave it.
        request_claim_lag: Seconds a step's request waited in its queue before an
            agent worker of this process took it, per agent.
        task_claim_lag: Seconds a task waited past its `not_before` (submitted,
            or due again after a reset's backoff) before a scheduler of this
            process claimed it, per workflow.
        tasks_ended: Tasks this process's schedulers brought to an end, per
            workflow and final `process_state` (`processed`, `compensated`,
            `cancelled`, `error`); the supervisor's escalations are counted apart.
        supervisor_resets: Expired claims this process's supervisor put back to
            pending, per workflow and cause (`expired`: its `complete_by` passed;
            `crash`: its owner process died).
        supervisor_escalations: Tasks this process's supervisor moved to `error`
            for an operator, per workflow and cause (`expired`, `crash`).
        supervisor_compensations: Tasks this process's supervisor sent to
            compensation at their failure threshold, per workflow.
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

        self.step_duration = Histogram(
            "shepherd_step_duration_seconds",
            "Seconds one try of a step's handler took, per agent.",
            ["agent"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.request_claim_lag = Histogram(
            "shepherd_request_claim_lag_seconds",
            "Seconds a step's request waited in its queue before an agent worker took it.",
            ["agent"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.task_claim_lag = Histogram(
            "shepherd_task_claim_lag_seconds",
            "Seconds a task waited past its not_before before a scheduler claimed it.",
            ["workflow"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.tasks_ended = Counter(
            "shepherd_tasks_ended",
            "Tasks brought to an end by this process's schedulers, by final process_state.",
            ["workflow", "process_state"],
            registry=self.registry,
        )
        self.supervisor_resets = Counter(
            "shepherd_supervisor_resets",
            "Claims the supervisor put back to pending (cause: expired or crash).",
            ["workflow", "cause"],
            registry=self.registry,
        )
        self.supervisor_escalations = Counter(
            "shepherd_supervisor_escalations",
            "Tasks the supervisor moved to error for an operator (cause: expired or crash).",
            ["workflow", "cause"],
            registry=self.registry,
        )
        self.supervisor_compensations = Counter(
            "shepherd_supervisor_compensations",
            "Tasks the supervisor sent to compensation at their failure threshold.",
            ["workflow"],
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
    duration: LabelledHistogram
    claim_lag: LabelledHistogram

    @classmethod
    def of(cls, metrics: Metrics, agent: str) -> AgentCounters:
        return cls(
            calls=metrics.calls.labels(agent=agent),
            retries=metrics.retries.labels(agent=agent),
            timeouts=metrics.timeouts.labels(agent=agent),
            transient=metrics.failures.labels(agent=agent, kind="transient"),
            permanent=metrics.failures.labels(agent=agent, kind="permanent"),
            bug=metrics.failures.labels(agent=agent, kind="bug"),
            duration=metrics.step_duration.labels(agent=agent),
            claim_lag=metrics.request_claim_lag.labels(agent=agent),
        )


@final
class WorkflowCounters:
    """A workflow's claim lag and ends, their labels bound on first use."""

    __slots__ = ("_ended", "_lags", "metrics")

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._lags: dict[str, LabelledHistogram] = {}
        self._ended: dict[tuple[str, str], LabelledCounter] = {}

    def claimed(self, workflow: str, lag: float) -> None:
        """A task of `workflow` was claimed `lag` seconds after it was due (0 if early)."""
        histogram = self._lags.get(workflow)
        if histogram is None:
            histogram = self._lags[workflow] = self.metrics.task_claim_lag.labels(workflow=workflow)
        histogram.observe(max(lag, 0.0))

    def ended(self, workflow: str, state: str) -> None:
        """A task of `workflow` ended in `state`."""
        counter = self._ended.get((workflow, state))
        if counter is None:
            counter = self.metrics.tasks_ended.labels(workflow=workflow, process_state=state)
            self._ended[(workflow, state)] = counter
        counter.inc()
