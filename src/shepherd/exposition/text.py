"""One scrape: the process's own metrics, then the store's gauges read now.

The gauges cost three indexed reads per scrape and nothing between scrapes,
none of which grows with the history the store keeps: `count_tasks_in` of the
open states (the index ranges of tasks pending, processing, compensating or
waiting in `error`; ended tasks, up to a week of them by default, are never
counted: their throughput is `shepherd_tasks_ended_total`), `queue_depths`
(the request and call rows in flight) and `list_breakers` (one row per
service). No step of a task waits for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shepherd.core.breaker import BreakerState
from shepherd.core.records import QueueDepth
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from shepherd.app import App
    from shepherd.store.contract import Store

__all__ = ["CONTENT_TYPE", "OPEN_STATES", "metrics_text", "store_families"]

#: The Content-Type of `metrics_text`'s answer: Prometheus' text format 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The states the `shepherd_tasks` gauge counts: those a task passes through, or
#: waits in for an operator. Their counts are bounded by the work in flight.
OPEN_STATES = (
    ProcessState.PENDING,
    ProcessState.PROCESSING,
    ProcessState.COMPENSATING,
    ProcessState.ERROR,
)


async def metrics_text(app: App) -> bytes:
    """Everything Prometheus scrapes from this process, in its text format.

    The counters and histograms of `app.metrics` (this process's own), then the
    store's gauges (`store_families`), read now.

    Raises:
        StoreUnavailableError: The store cannot be read now (a scrape then
            answers 503; the process's roles carry on).
    """
    await app.open()
    gauges = CollectorRegistry(auto_describe=False)
    gauges.register(_Families(await store_families(app.store, agents=app.agents)))
    return generate_latest(app.metrics.registry) + generate_latest(gauges)


async def store_families(store: Store, *, agents: Iterable[str] = ()) -> list[Metric]:
    """The gauges read from the store: open tasks by state, queue depths, each breaker's state.

    Every open state and every agent in `agents` is listed, at 0 when the store
    has nothing for it, so that a series does not vanish when it drops to 0.
    """
    counts = await store.count_tasks_in(OPEN_STATES)
    depths = {depth.agent: depth for depth in await store.queue_depths()}
    breakers = await store.list_breakers()
    tasks = GaugeMetricFamily(
        "shepherd_tasks",
        "Tasks pending, processing, compensating or in error (read at scrape time).",
        labels=["process_state"],
    )
    for process_state in OPEN_STATES:
        tasks.add_metric([process_state.value], counts.get(process_state, 0))
    requests = GaugeMetricFamily(
        "shepherd_queue_requests",
        "Step requests per agent: waiting to be taken, or taken and within their window.",
        labels=["agent", "state"],
    )
    calls = GaugeMetricFamily(
        "shepherd_queue_calls",
        "Calls (app.call) per agent: waiting to be taken, or taken and within their window.",
        labels=["agent", "state"],
    )
    for agent in sorted({*agents, *depths}):
        depth = depths.get(agent, QueueDepth(agent=agent))
        requests.add_metric([agent, "waiting"], depth.requests_waiting)
        requests.add_metric([agent, "taken"], depth.requests_taken)
        calls.add_metric([agent, "waiting"], depth.calls_waiting)
        calls.add_metric([agent, "taken"], depth.calls_taken)
    breaker = GaugeMetricFamily(
        "shepherd_breaker_state",
        "Circuit breaker state per service: 1 for the state it is in, 0 for the others.",
        labels=["service", "state"],
    )
    for stored in breakers:
        for state in BreakerState:
            breaker.add_metric([stored.service, state.value], float(stored.state is state))
    return [tasks, requests, calls, breaker]


@final
class _Families(Collector):
    """Metric families computed already, handed to prometheus-client's text writer."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)
