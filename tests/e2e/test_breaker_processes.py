"""One circuit breaker shared by two real agent processes, on SQLite (one file) and PostgreSQL.

Process A's agent finds the service down and opens the breaker of `payments`;
process B, another agent process calling the same service, starts afterwards
and must not call the service while the breaker is open: every request the
service receives while down after the opening must be a probe, and each probe
is one `open -> half_open` change in the store. Both logs, the service's and
the store's, are compared once the service is back and every task finished.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shepherd import ProcessState
from shepherd.testing import wait_until
from support import breaker_worker
from support.breaker_worker import POLICY, SERVICE, build_app, register
from support.http_service import serve
from support.processes import spawn_worker, workers

if TYPE_CHECKING:
    from shepherd import App

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0
BREAKER_WORKER = Path(breaker_worker.__file__)


@dataclass
class Switch:
    """A service that is up or down; it keeps (worker, status) of every answer, in order."""

    base_url: str = ""
    up: bool = False
    answers: list[tuple[str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.base_url}/charges"

    def seen(self) -> list[tuple[str, int]]:
        with self.lock:
            return list(self.answers)

    async def endpoint(self, request: Request) -> Response:
        body = await request.json()
        with self.lock:
            status = 200 if self.up else 503
            self.answers.append((request.headers.get("x-worker", "?"), status))
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


async def changes(app: App) -> list[tuple[str, str]]:
    """The breaker's changes of state, oldest first."""
    events = await app.store.breaker_events(service=SERVICE, limit=10_000)
    return [(str(e.from_state), str(e.to_state)) for e in reversed(events)]


async def test_an_agent_process_makes_no_calls_while_another_ones_breaker_is_open(
    shared_store: str, switch: Switch, tmp_path: Path
) -> None:
    # This process schedules and supervises; the two agents run in A and B only.
    app = build_app(shared_store)
    register(app, "a", switch.url)
    register(app, "b", switch.url)
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            running.append(
                spawn_worker(
                    shared_store,
                    tmp_path,
                    name="a",
                    roles="agent",
                    script=BREAKER_WORKER,
                    agent="a",
                    url=switch.url,
                )
            )
            first = await app.submit("pay_a", {"n": 0})

            async def opened() -> bool:
                return ("closed", "open") in await changes(app)

            await wait_until(opened, timeout=PATIENCE, message="A never opened the breaker")

            running.append(
                spawn_worker(
                    shared_store,
                    tmp_path,
                    name="b",
                    roles="agent",
                    script=BREAKER_WORKER,
                    agent="b",
                    url=switch.url,
                )
            )
            rest = [await app.submit("pay_b", {"n": n}) for n in range(1, 5)]

            async def failed_probes(n: int) -> bool:
                return (await changes(app)).count(("half_open", "open")) >= n

            await wait_until(
                lambda: failed_probes(3), timeout=PATIENCE, message="no probes while down"
            )
            switch.up = True

            async def all_processed() -> bool:
                counts = await app.store.count_tasks()
                return counts.get(ProcessState.PROCESSED, 0) == 5

            await wait_until(all_processed, timeout=PATIENCE, message="tasks did not finish")
            for worker in running:
                assert worker.alive(), worker.stderr()

        seen = await changes(app)
        tasks = [await app.get_task(task_id) for task_id in [first, *rest]]

    answers = switch.seen()
    assert answers[: POLICY.failure_threshold] == [("a", 503)] * POLICY.failure_threshold
    down = [worker for worker, status in answers if status == 503]
    probes = seen.count(("open", "half_open"))
    # After the opening, every request that found the service down was a probe,
    # and every probe but the last (which closed the breaker) found it down.
    assert len(down) == POLICY.failure_threshold + seen.count(("half_open", "open"))
    assert seen == [("closed", "open")] + [("open", "half_open"), ("half_open", "open")] * (
        probes - 1
    ) + [("open", "half_open"), ("half_open", "closed")]
    assert probes >= 4
    # B held its tries back while open, then made exactly one successful call per task.
    assert sorted(worker for worker, status in answers if status == 200) == ["a"] + ["b"] * 4
    assert all(t.process_state is ProcessState.PROCESSED for t in tasks)
    assert all(t.failure_count == 0 for t in tasks)
