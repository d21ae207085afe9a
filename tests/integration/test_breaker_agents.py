"""The shared circuit breaker in front of a real HTTP service, on both backends.

The service is down (503) or up (200) as the test says, and records every
request it receives and what it answered. The breaker's events in the store say
when it opened and when each probe was allowed, so the tests compare the two
logs instead of timing anything.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shepherd import App, BreakerPolicy, ProcessState, RetryPolicy
from shepherd.agents.http import http_agent
from shepherd.core.breaker import BreakerState
from shepherd.errors import TaskFailedError
from shepherd.testing import wait_until
from support.http_service import serve

if TYPE_CHECKING:
    from shepherd import Alert, WorkflowContext
    from shepherd.core.breaker import BreakerEvent
    from shepherd.core.records import JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 20.0
SERVICE = "payments"
#: Retries at once and (nearly) for ever: only the breaker holds calls back.
EAGER = RetryPolicy(max_attempts=1000, initial_delay=0.001, max_delay=0.002)
POLICY = BreakerPolicy(failure_threshold=3, cool_down=0.3)


@dataclass
class Switch:
    """A service that is up or down; it keeps the status of every answer, in order."""

    base_url: str = ""
    up: bool = False
    #: Answers 503 this many times more, even when up.
    fail_next: int = 0
    answers: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.base_url}/charges"

    def count(self, status: int) -> int:
        with self.lock:
            return self.answers.count(status)

    async def endpoint(self, request: Request) -> Response:
        body = await request.json()
        with self.lock:
            status = 200 if self.up and not self.fail_next else 503
            self.fail_next = max(0, self.fail_next - 1)
            self.answers.append(status)
        if status == 200:
            return JSONResponse({"charged": body})
        return PlainTextResponse("down", status_code=503)


@pytest.fixture
def switch() -> Iterator[Switch]:
    svc = Switch()
    app = Starlette(routes=[Route("/charges", svc.endpoint, methods=["POST"])])
    with serve(app) as base_url:
        svc.base_url = base_url
        yield svc


def register(
    app: App,
    switch: Switch,
    *,
    within: float = 15.0,
    max_failures: int = 3,
    policy: BreakerPolicy = POLICY,
) -> None:
    http_agent(
        app,
        "charge",
        "POST",
        switch.url,
        within=within,
        retry=EAGER,
        breaker=policy,
        service=SERVICE,
    )

    @app.workflow("pay", complete_within=PATIENCE, max_failures=max_failures)
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("charge", data)


async def changes(app: App) -> list[tuple[str, str]]:
    """The breaker's changes of state, oldest first."""
    events: list[BreakerEvent] = await app.store.breaker_events(service=SERVICE, limit=10_000)
    return [(str(e.from_state), str(e.to_state)) for e in reversed(events)]


async def ended(app: App, task_id: str) -> Task:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


async def test_the_breaker_opens_holds_calls_back_and_one_probe_closes_it(
    app: App, switch: Switch
) -> None:
    register(app, switch)

    async with app.running():
        first = await app.submit("pay", {"n": 0})

        async def opened() -> bool:
            return ("closed", "open") in await changes(app)

        await wait_until(opened, timeout=PATIENCE, message="the breaker never opened")
        # Exactly the threshold reached the service; every later try waits.
        assert switch.count(503) == POLICY.failure_threshold
        rest = [await app.submit("pay", {"n": n}) for n in range(1, 5)]

        async def failed_probes(n: int) -> bool:
            return (await changes(app)).count(("half_open", "open")) >= n

        await wait_until(lambda: failed_probes(2), timeout=PATIENCE, message="no probes while down")
        mid = await app.get_task(rest[0])
        assert mid.process_state is ProcessState.PROCESSING, "an open breaker fails no task"
        switch.up = True
        done = [await ended(app, task_id) for task_id in [first, *rest]]

    assert [t.process_state for t in done] == [ProcessState.PROCESSED] * 5
    assert [t.failure_count for t in done] == [0] * 5
    seen = await changes(app)
    probes = seen.count(("open", "half_open"))
    # Every request while down after the opening was a probe: one per cool-down.
    assert switch.count(503) == POLICY.failure_threshold + seen.count(("half_open", "open"))
    assert seen == [("closed", "open")] + [("open", "half_open"), ("half_open", "open")] * (
        probes - 1
    ) + [("open", "half_open"), ("half_open", "closed")]
    # Once the probe closed it, each task made its one successful call.
    assert switch.count(200) == 5
    breaker = await app.store.get_breaker(SERVICE)
    assert breaker is not None
    assert (breaker.state, breaker.consecutive_failures) == (BreakerState.CLOSED, 0)
    metrics = app.metrics
    assert metrics.value("breaker_transitions", service=SERVICE, change="closed->open") == 1
    assert metrics.value("breaker_transitions", service=SERVICE, change="half_open->closed") == 1
    assert metrics.value("breaker_waits", service=SERVICE) >= 4


async def test_a_step_whose_complete_by_passes_while_open_is_left_to_the_supervisor(
    app: App, switch: Switch, alerts: list[Alert]
) -> None:
    slow = BreakerPolicy(failure_threshold=3, cool_down=60.0)
    register(app, switch, within=0.3, max_failures=1, policy=slow)
    for _ in range(slow.failure_threshold):  # another process found the service down
        await app.store.breaker_report(SERVICE, slow, failed=True)

    async with app.running():
        task = await ended(app, await app.submit("pay", {"n": 1}))

    assert switch.answers == [], "no request may reach the service while the breaker is open"
    assert task.process_state is ProcessState.ERROR
    history = await app.history(task.id)
    timed_out = [e.detail for e in history if e.kind == "step_timed_out"]
    assert timed_out
    assert timed_out[0]["error"]["type"] == "BreakerOpen"
    assert timed_out[0]["tries"] == 0
    assert [a.task_id for a in alerts] == [task.id]
    assert app.metrics.value("breaker_waits", service=SERVICE) >= 1


async def test_a_healthy_service_costs_no_breaker_writes(app: App, switch: Switch) -> None:
    switch.up = True
    register(app, switch)
    reports: list[bool] = []
    breaker_report = app.store.breaker_report

    async def spy(service: str, policy: BreakerPolicy, *, failed: bool) -> Any:
        reports.append(failed)
        return await breaker_report(service, policy, failed=failed)

    app.store.breaker_report = spy

    async with app.running():
        ids = [await app.submit("pay", {"n": n}) for n in range(10)]
        done = [await ended(app, task_id) for task_id in ids]

    assert [t.process_state for t in done] == [ProcessState.PROCESSED] * 10
    assert reports == []
    assert await app.store.breaker_events() == []


async def test_a_success_after_failures_resets_the_count(app: App, switch: Switch) -> None:
    switch.up = True
    switch.fail_next = 2
    register(app, switch)

    async with app.running():
        task = await ended(app, await app.submit("pay", {"n": 1}))

    assert task.process_state is ProcessState.PROCESSED
    assert switch.answers == [503, 503, 200]
    breaker = await app.store.get_breaker(SERVICE)
    assert breaker is not None
    assert (breaker.state, breaker.consecutive_failures) == (BreakerState.CLOSED, 0)
    assert await changes(app) == []
