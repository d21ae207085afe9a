"""`metrics_text(app)` is one Prometheus scrape: the process's metrics and the store's gauges.

Parsed with prometheus-client's own parser, on SQLite and PostgreSQL (the
`app` fixture): its counters and histograms move when tasks run, and its
gauges show the tasks by state, the queues per agent and the breakers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from shepherd import ProcessState
from shepherd.exposition import CONTENT_TYPE, metrics_text

if TYPE_CHECKING:
    from shepherd import AgentRequest, App, WorkflowContext
    from shepherd.core.records import JsonValue

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0


async def scrape(app: App) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one scrape, keyed (name, sorted labels)."""
    text = (await metrics_text(app)).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def tasks_in(samples: dict[Any, float], state: ProcessState) -> float:
    return samples[("shepherd_tasks", (("process_state", state.value),))]


async def test_an_empty_store_lists_every_state_at_zero(app: App) -> None:
    samples = await scrape(app)

    assert {tasks_in(samples, state) for state in ProcessState} == {0.0}
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


async def test_counters_and_task_gauges_move_when_tasks_run(app: App) -> None:
    @app.agent("echo")
    async def echo(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("orders.echo")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("echo", data)

    async with app.running():
        ids = [await app.submit("orders.echo", {"n": n}) for n in range(3)]
        for task_id in ids:
            await app.result(task_id, timeout=PATIENCE)

    samples = await scrape(app)

    assert samples[("shepherd_agent_calls_total", (("agent", "echo"),))] == 3.0
    assert tasks_in(samples, ProcessState.PROCESSED) == 3.0
    assert tasks_in(samples, ProcessState.PENDING) == 0.0
