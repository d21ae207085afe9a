"""Capacity across real processes, on SQLite (one file) and PostgreSQL.

Three agent processes call one HTTP service through the resource `orders-db`,
whose capacity is 3: the service counts the requests it is serving at once and
must never see more than 3, and does see 3 (its first callers wait until three
are in, so a cap that let fewer through fails too). Then a holder is SIGKILLed
in the middle of a call: its slot is free again once its lease ends, and the
other process serves the next tasks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shepherd import ProcessState, Submission
from shepherd.core.rates import burst_of
from shepherd.testing import wait_until
from support import capacity_worker
from support.capacity_worker import API_WORKFLOW, WORKFLOW, build_app, register
from support.http_service import serve
from support.processes import Worker, spawn_worker, workers
from support.slots import held_slots

if TYPE_CHECKING:
    from shepherd import App

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0
CAPACITY_WORKER = Path(capacity_worker.__file__)


@dataclass
class Counting:
    """A service that counts the requests it serves at once.

    Its first callers wait until `fill` of them are in at once (or `PATIENCE`
    passes), so that the test sees the cap reached, not only respected. A
    request whose payload says `hang` is held until the service stops.
    """

    fill: int
    base_url: str = ""
    in_flight: int = 0
    most: int = 0
    #: The worker header of each request served, in order.
    served: list[str] = field(default_factory=list)
    #: When each worker's first request arrived (unix seconds).
    first_start: dict[str, float] = field(default_factory=dict)
    #: Workers whose request is held (hanging).
    hanging: list[str] = field(default_factory=list)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set by the test's thread as the service stops: a hanging request ends.
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"{self.base_url}/use"

    async def endpoint(self, request: Request) -> Response:
        body = await request.json()
        worker = request.headers.get("x-worker", "?")
        self.first_start.setdefault(worker, time.time())
        self.in_flight += 1  # one event loop serves every request: no lock needed
        self.most = max(self.most, self.in_flight)
        try:
            if self.in_flight >= self.fill:
                self.full.set()
            if body.get("hang") and worker == "a":
                self.hanging.append(worker)
                await asyncio.to_thread(self.stop.wait, PATIENCE)  # the service hangs
            elif not self.full.is_set():
                async with asyncio.timeout(PATIENCE):
                    await self.full.wait()
            else:
                await asyncio.sleep(0.01)  # the service's own work
            self.served.append(worker)
            return JSONResponse({"written": body})
        finally:
            self.in_flight -= 1


@pytest.fixture
def service(request: pytest.FixtureRequest) -> Iterator[Counting]:
    svc = Counting(fill=getattr(request, "param", 3))
    app = Starlette(routes=[Route("/use", svc.endpoint, methods=["POST"])])
    with serve(app) as base_url:
        svc.base_url = base_url
        yield svc
        svc.stop.set()


def agents(
    store: str,
    workdir: Path,
    service: Counting,
    name: str,
    *,
    slot_lease: float = 15.0,
    log: Path | None = None,
) -> Worker:
    """An agent process `name` of the capacity worker, calling `service`."""
    return spawn_worker(
        store,
        workdir,
        name=name,
        roles="agent",
        script=CAPACITY_WORKER,
        url=service.url,
        log_path=log,
        settings={"name": name, "slot_lease": slot_lease},
    )


async def processed(app: App, n: int) -> bool:
    return (await app.store.count_tasks()).get(ProcessState.PROCESSED, 0) >= n


async def test_three_processes_never_use_more_than_capacity_slots(
    shared_store: str, service: Counting, tmp_path: Path
) -> None:
    app = build_app(shared_store, capacity=3)
    register(app, service.url, name="test")
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            running.extend(agents(shared_store, tmp_path, service, name) for name in "abc")
            ids = [await app.submit(WORKFLOW, {"n": n}) for n in range(20)]
            await wait_until(lambda: processed(app, 20), timeout=PATIENCE, message="not all done")
            for worker in running:
                assert worker.alive(), worker.stderr()
        tasks = [await app.get_task(task_id) for task_id in ids]

    assert service.most == 3
    assert len(service.served) == 20
    assert all(t is not None and t.failure_count == 0 for t in tasks)


@pytest.mark.parametrize("service", [1], indirect=True)
async def test_the_slot_of_a_sigkilled_holder_is_free_once_its_lease_ends(
    shared_store: str, service: Counting, tmp_path: Path
) -> None:
    app = build_app(shared_store, capacity=1, slot_lease=1.5)
    register(app, service.url, name="test")
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            holder = agents(shared_store, tmp_path, service, "a", slot_lease=1.5)
            running.append(holder)
            await app.submit(WORKFLOW, {"hang": True})
            await wait_until(
                lambda: "a" in service.hanging,
                timeout=PATIENCE,
                message="the first call never reached the service",
            )
            (held,) = await held_slots(shared_store, "orders-db")
            holder.kill()
            # A is dead: its slot's lease is final now (no renewal can move it).
            (lease,) = await held_slots(shared_store, "orders-db")
            assert lease.holder == held.holder
            running.append(agents(shared_store, tmp_path, service, "b", slot_lease=1.5))
            after = [await app.submit(WORKFLOW, {"n": n}) for n in range(3)]

            async def served_after() -> bool:
                done = [await app.get_task(t) for t in after]
                return all(
                    t is not None and t.process_state is ProcessState.PROCESSED for t in done
                )

            # Capacity 1: B can serve them only once A's slot has expired.
            await wait_until(served_after, timeout=PATIENCE, message="A's slot was never freed")
            assert running[1].alive(), running[1].stderr()

    assert service.served.count("b") >= 3
    assert "a" not in service.served
    # B started its first call only once A's lease had expired (store clock vs
    # the service's clock: one machine, one clock; an order, not a duration).
    assert service.first_start["b"] >= lease.expires_at


def most_in_any_window(starts: list[float], *, rate: float) -> list[tuple[int, float]]:
    """For each pair of starts (i <= j): the calls from i to j and the allowance of that span."""
    ordered = sorted(starts)
    return [
        (j - i + 1, burst_of(rate) + rate * (ordered[j] - first))
        for i, first in enumerate(ordered)
        for j in range(i, len(ordered))
    ]


async def test_three_processes_share_one_rate(
    shared_store: str, service: Counting, tmp_path: Path
) -> None:
    rate, calls = 10.0, 120  # 10 s of calls past the first second's burst
    app = build_app(shared_store, rate=rate)
    register(app, service.url, name="test")
    logs = [tmp_path / f"{name}.starts" for name in ("a", "b", "c")]
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            for name, log in zip("abc", logs, strict=True):
                running.append(agents(shared_store, tmp_path, service, name, log=log))
            await app.submit_many([Submission(API_WORKFLOW, {"n": n}) for n in range(calls)])
            await wait_until(
                lambda: processed(app, calls), timeout=PATIENCE * 2, message="not all done"
            )
            for worker in running:
                assert worker.alive(), worker.stderr()

    lines = [log.read_text().split() if log.exists() else [] for log in logs]
    starts = [float(line) for one in lines for line in one]
    assert len(starts) == calls
    assert all(lines), "every process made calls"
    # Recorded by the handlers themselves, in every process: no span of starts
    # holds more calls than the bucket allows (a second's worth plus rate x span;
    # +1 for the moment between a token's grant and its handler's start).
    over = [(n, allowed) for n, allowed in most_in_any_window(starts, rate=rate) if n > allowed + 1]
    assert over == []
