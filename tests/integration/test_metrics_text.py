"""`metrics_text(app)` is one Prometheus scrape: the process's metrics and the store's gauges.

Parsed with prometheus-client's own parser, on SQLite and PostgreSQL (the
`app` fixture): its counters and histograms move when tasks run, and its
gauges show the tasks by state, the queues per agent and the breakers.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shepherd import App, BreakerPolicy, ProcessState
from shepherd.assembly import Assembly
from shepherd.exposition import CONTENT_TYPE, OPEN_STATES, metrics_text
from shepherd.testing import FakeClock, wait_until
from support import fake_time
from support.fake_time import WINDOW

if TYPE_CHECKING:
    from shepherd import AgentRequest, WorkflowContext
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


async def test_an_empty_store_lists_every_open_state_at_zero(app: App) -> None:
    samples = await scrape(app)

    assert {tasks_in(samples, state) for state in OPEN_STATES} == {0.0}
    # Ended tasks are never counted at a scrape: their number grows with history.
    assert {labels for name, labels in samples if name == "shepherd_tasks"} == {
        (("process_state", state.value),) for state in OPEN_STATES
    }
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
        # A result is readable once its commit is; the scheduler counts the end when
        # the write returns to it, a moment later.
        ended = (("process_state", "processed"), ("workflow", "orders.echo"))

        async def all_counted() -> bool:
            return (await scrape(app)).get(("shepherd_tasks_ended_total", ended)) == 3.0

        await wait_until(all_counted, timeout=PATIENCE, message="the ends were not counted")

    samples = await scrape(app)

    agent = (("agent", "echo"),)
    workflow = (("workflow", "orders.echo"),)
    assert samples[("shepherd_agent_calls_total", agent)] == 3.0
    assert samples[("shepherd_step_duration_seconds_count", agent)] == 3.0
    assert samples[("shepherd_step_duration_seconds_bucket", (*agent, ("le", "+Inf")))] == 3.0
    assert samples[("shepherd_request_claim_lag_seconds_count", agent)] == 3.0
    assert samples[("shepherd_task_claim_lag_seconds_count", workflow)] == 3.0
    assert samples[("shepherd_tasks_ended_total", ended)] == 3.0
    assert {tasks_in(samples, state) for state in OPEN_STATES} == {0.0}
    assert samples[("shepherd_queue_requests", (*agent, ("state", "waiting")))] == 0.0


async def test_queue_gauges_show_requests_and_calls_waiting_for_an_agent(app: App) -> None:
    @app.agent("echo")
    async def echo(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("orders.echo")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("echo", data)

    await app.store.send_call("c1", "echo", {"n": 1}, within=5.0, max_attempts=1, expires_in=60)
    # No agent role runs: the steps' requests wait in the agent's queue.
    async with app.running(roles=("scheduler",)):
        for n in range(2):
            await app.submit("orders.echo", {"n": n})
        key = ("shepherd_queue_requests", (("agent", "echo"), ("state", "waiting")))

        async def two_waiting() -> bool:
            return (await scrape(app))[key] == 2.0

        await wait_until(two_waiting, timeout=PATIENCE, message="no requests waiting")

    samples = await scrape(app)
    calls = ("shepherd_queue_calls", (("agent", "echo"), ("state", "waiting")))
    assert samples[calls] == 1.0
    assert (
        tasks_in(samples, ProcessState.PENDING) + tasks_in(samples, ProcessState.PROCESSING) == 2.0
    )


async def test_the_breaker_gauge_shows_each_service_in_one_state(app: App) -> None:
    await app.open()
    await app.store.breaker_report("payments", BreakerPolicy(failure_threshold=1), failed=True)
    await app.store.breaker_report("email", BreakerPolicy(), failed=False)

    samples = await scrape(app)

    def state(service: str, name: str) -> float:
        return samples[("shepherd_breaker_state", (("service", service), ("state", name)))]

    assert [state("payments", s) for s in ("closed", "open", "half_open")] == [0.0, 1.0, 0.0]
    assert [state("email", s) for s in ("closed", "open", "half_open")] == [1.0, 0.0, 0.0]


@pytest.mark.fake_time
async def test_supervisor_resets_and_escalations_are_counted(app: App) -> None:
    attempts: list[int] = []

    @app.agent("stuck")
    async def stuck(request: AgentRequest) -> JsonValue:
        attempts.append(request.attempt)
        return await asyncio.Event().wait()  # a remote call that never answers

    @app.workflow("orders.stuck", max_failures=2)
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("stuck", data, within=WINDOW)

    async with app.running():
        task_id = await app.submit("orders.stuck", {})
        await wait_until(lambda: attempts == [1], timeout=PATIENCE)
        await fake_time.pass_until(app, fake_time.has_event(app, task_id, "reset"))
        await wait_until(lambda: attempts == [1, 2], timeout=PATIENCE)
        await fake_time.ended(app, task_id)

    samples = await scrape(app)
    cause = (("cause", "expired"), ("workflow", "orders.stuck"))
    assert samples[("shepherd_supervisor_resets_total", cause)] == 1.0
    assert samples[("shepherd_supervisor_escalations_total", cause)] == 1.0
    assert tasks_in(samples, ProcessState.ERROR) == 1.0


async def test_claim_lags_are_how_long_a_task_and_a_request_waited(
    store_url: str, fake_clock: FakeClock
) -> None:
    app = App(store_url, alerts=(), clock=fake_clock, poll_interval=1.0)

    @app.agent("echo")
    async def echo(request: AgentRequest) -> JsonValue:
        return request.payload

    @app.workflow("orders.echo")
    async def flow(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("echo", data, within=60.0)

    try:
        await app.open()
        task_id = await app.submit("orders.echo", {})
        fake_clock.advance(3.0)  # the task waits 3 s for a scheduler
        async with app.running(roles=("scheduler",)):
            waiting = ("shepherd_queue_requests", (("agent", "echo"), ("state", "waiting")))

            async def queued() -> bool:
                return (await scrape(app))[waiting] == 1.0

            await wait_until(queued, timeout=PATIENCE, message="the step was not queued")
            fake_clock.advance(7.0)  # its request waits 7 s for an agent
            worker = asyncio.create_task(Assembly(app).agent_worker().run())
            try:
                await app.result(task_id, timeout=PATIENCE)
            finally:
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
        samples = await scrape(app)
    finally:
        await app.close()

    def below(name: str, labels: tuple[tuple[str, str], ...], le: str) -> float:
        return samples[(f"{name}_bucket", tuple(sorted((*labels, ("le", le)))))]

    task = ("shepherd_task_claim_lag_seconds", (("workflow", "orders.echo"),))
    assert (below(*task, "2.5"), below(*task, "5.0")) == (0.0, 1.0)
    request = ("shepherd_request_claim_lag_seconds", (("agent", "echo"),))
    assert (below(*request, "5.0"), below(*request, "10.0")) == (0.0, 1.0)
