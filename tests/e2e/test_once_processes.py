"""A side effect inside `request.once(...)` survives a SIGKILLed agent process, on SQLite and PostgreSQL.

A real HTTP service counts charges. Agent process A charges inside `once`, the
charge is recorded in the store, and A is SIGKILLed before it replies; the
supervisor (in the test process) gives the step up at complete_by and sends it
again; agent process B executes the step and gets the recorded result without
charging again. If A dies *during* the charge, nobody knows whether it
happened: B fails the step and says so, the task goes to `error`, and the
operator's `shepherd retry TASK --step 1` clears the mark and charges again.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shepherd import ProcessState, StepState
from shepherd.testing import wait_until
from support import once_worker
from support.http_service import serve
from support.once_worker import build_app, register
from support.processes import Worker, spawn_worker, workers

if TYPE_CHECKING:
    from shepherd import App
    from shepherd.core.records import Task

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0
ONCE_WORKER = Path(once_worker.__file__)


@dataclass
class Payments:
    """A service that counts charges: (idempotency key, worker pid) of each, in order."""

    base_url: str = ""
    #: Whether a charge hangs (recorded, never answered) until its caller goes away.
    hang: bool = False
    charges: list[tuple[str, str]] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self) -> tuple[list[tuple[str, str]], list[str]]:
        with self.lock:
            return list(self.charges), list(self.held)

    async def charge(self, request: Request) -> Response:
        body = await request.json()
        with self.lock:
            self.charges.append((request.headers["idempotency-key"], request.headers["x-worker"]))
            number = len(self.charges)
            hang = self.hang
        while hang and (await request.receive())["type"] != "http.disconnect":
            pass  # the body is read: the next message is the caller going away
        return JSONResponse({"charge_id": f"ch-{number}", "amount": body["amount"]})

    async def hold(self, request: Request) -> Response:
        with self.lock:
            self.held.append(request.headers["x-worker"])
        return JSONResponse({})


@pytest.fixture
def payments() -> Iterator[Payments]:
    svc = Payments()
    app = Starlette(
        routes=[
            Route("/charges", svc.charge, methods=["POST"]),
            Route("/held", svc.hold, methods=["POST"]),
        ]
    )
    with serve(app) as base_url:
        svc.base_url = base_url
        yield svc


def shepherd_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m shepherd ARGS...` to its end, as an operator would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    return subprocess.run(
        [sys.executable, "-m", "shepherd", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def agent_process(
    store: str, tmp_path: Path, payments: Payments, name: str, **options: int
) -> Worker:
    """Start a real agent process running the `once` worker against `payments`."""
    return spawn_worker(
        store,
        tmp_path,
        name=name,
        roles="agent",
        script=ONCE_WORKER,
        url=payments.base_url,
        settings=options,
    )


async def finished(app: App, task_id: str) -> Task:
    """Wait until the task is processed or in error; return it."""

    async def done() -> bool:
        task = await app.get_task(task_id)
        return task.process_state in (ProcessState.PROCESSED, ProcessState.ERROR)

    await wait_until(done, timeout=PATIENCE, message=f"task {task_id} did not finish")
    return await app.get_task(task_id)


async def test_a_charge_recorded_before_a_sigkill_is_not_made_again(
    shared_store: str, payments: Payments, tmp_path: Path
) -> None:
    # This process schedules and supervises; the agent runs in A, then in B.
    app = build_app(shared_store)
    register(app, payments.base_url)
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            a = agent_process(shared_store, tmp_path, payments, "a", hold=1)
            running.append(a)
            task_id = await app.submit("pay", {"amount": 5})

            await wait_until(
                lambda: bool(payments.seen()[1]), timeout=PATIENCE, message="A never held"
            )
            a.kill()

            b = agent_process(shared_store, tmp_path, payments, "b")
            running.append(b)
            task = await finished(app, task_id)
            assert b.alive(), b.stderr()

    charges, held = payments.seen()
    assert charges == [(f"{task_id}/1", str(a.pid))], "the charge must be made exactly once"
    assert held == [str(a.pid)]
    assert task.process_state is ProcessState.PROCESSED, task
    assert task.result == {"charge_id": "ch-1", "amount": 5}
    (step,) = task.steps
    assert step.state is StepState.COMPLETED
    assert step.attempt >= 2
    # A's death is attributed to the step running there, not counted as a failure.
    assert task.failure_count == 0
    assert [entry.rsplit("#", 1)[1] for entry in task.crashes] == ["1"]


async def test_a_charge_cut_by_a_sigkill_waits_for_the_operator(
    shared_store: str, payments: Payments, tmp_path: Path
) -> None:
    payments.hang = True
    app = build_app(shared_store)
    register(app, payments.base_url)
    async with app, app.running(["scheduler", "supervisor"]):
        with workers() as running:
            a = agent_process(shared_store, tmp_path, payments, "a")
            running.append(a)
            task_id = await app.submit("pay", {"amount": 7})

            await wait_until(
                lambda: bool(payments.seen()[0]), timeout=PATIENCE, message="A never charged"
            )
            a.kill()  # mid-charge: did it happen? Only the service knows.
            payments.hang = False

            b = agent_process(shared_store, tmp_path, payments, "b")
            running.append(b)
            errored = await finished(app, task_id)
            assert errored.process_state is ProcessState.ERROR, errored
            assert len(payments.seen()[0]) == 1, "B must not charge while the outcome is unknown"
            reason = errored.error["reason"]
            assert "may have happened" in reason
            assert f"shepherd retry {task_id} --step 1" in reason
            assert errored.error["type"] == "OutcomeUnknownError"

            # The operator checked the service, and decides to charge again.
            retried = await asyncio.to_thread(
                shepherd_cli, "retry", task_id, "--step", "1", "--store", shared_store, cwd=tmp_path
            )
            assert retried.returncode == 0, retried.stderr
            task = await finished(app, task_id)
            assert b.alive(), b.stderr()

    charges, _ = payments.seen()
    assert charges == [(f"{task_id}/1", str(a.pid)), (f"{task_id}/1", str(b.pid))]
    assert task.process_state is ProcessState.PROCESSED, task
    assert task.result == {"charge_id": "ch-2", "amount": 7}
