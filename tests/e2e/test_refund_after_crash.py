"""The how-to's refund handler refunds the right charge when the charge's process was SIGKILLed mid-call.

Real processes on SQLite and PostgreSQL, and a real HTTP payments service in
the test's process: a worker (`shepherd run --app refund_app:app`, the example
of docs/howto/agents.md) charges order A, which ends `processed`, then order
B, whose charge the service records and never answers. The worker is
SIGKILLed there: B's charge step stays `running`, its outcome unknown. The
operator cancels B; a second worker undoes it. The refund receives
`"outcome": "unknown"` and the charge step's `idempotency_key`, finds B's
charge by that key, and refunds it, and only it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from shepherd import App, TaskFailedError
from shepherd.core.states import StepKind
from support.cli_checks import ok
from support.http_service import serve

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EXAMPLE = Path(__file__).parents[2] / "docs" / "howto" / "refund_app.py"
#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 60.0


@dataclass
class Payments:
    """A payments service: charges filed by idempotency key, refunds, one order that hangs."""

    hang: str
    charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: list[str] = field(default_factory=list)
    hung: threading.Event = field(default_factory=threading.Event)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    async def charge(self, request: Request) -> JSONResponse:
        key = request.headers["Idempotency-Key"]
        order = await request.json()
        found = [c for c in self.charges.values() if c["key"] == key]
        if found:  # the same step again: the same charge
            return JSONResponse(found[0])
        charge = {"id": f"ch_{next(self._ids)}", "key": key, "order": order["id"]}
        self.charges[charge["id"]] = charge
        if order["id"] == self.hang:
            self.hung.set()
            # Charged, never answered: the call hangs until its caller is gone
            # (waiting for the disconnect, not forever, lets the server stop).
            while (await request.receive())["type"] != "http.disconnect":
                pass
        return JSONResponse(charge)

    async def find(self, request: Request) -> JSONResponse:
        key = request.query_params["idempotency_key"]
        return JSONResponse([c for c in self.charges.values() if c["key"] == key])

    async def refund(self, request: Request) -> JSONResponse:
        charge = self.charges[request.path_params["id"]]
        self.refunds.append(charge["id"])
        return JSONResponse({**charge, "refunded": True})

    def asgi(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/charges", self.charge, methods=["POST"]),
                Route("/charges", self.find, methods=["GET"]),
                Route("/charges/{id}/refund", self.refund, methods=["POST"]),
            ]
        )


def test_a_refund_from_the_howto_refunds_the_charge_of_a_step_killed_mid_call(
    shepherd_cli_in_process: Cli,
    shepherd_process: Callable[..., AbstractContextManager[Any]],
    cli_dir: Path,
    cli_env: dict[str, str],
    shared_store: str,
) -> None:
    shutil.copy(EXAMPLE, cli_dir / "refund_app.py")
    payments = Payments(hang="B")
    with serve(payments.asgi()) as base:
        env = {**cli_env, "SHEPHERD_STORE": shared_store, "PAYMENTS_URL": base}
        app = ("--app", "refund_app:app")

        def cli(*args: str) -> str:
            return ok(shepherd_cli_in_process(*args, *app, env=env))

        with shepherd_process("run", *app, env=env) as first:
            paid = json.loads(cli("submit", "orders.pay", '{"id": "A"}', "--wait", "60", "--json"))
            assert paid["process_state"] == "processed"
            hung = cli("submit", "orders.pay", '{"id": "B"}').strip()
            assert payments.hung.wait(PATIENCE), "order B's charge never reached the service"
            first.close()  # SIGKILL, mid-call

        assert "compensating" in cli("cancel", hung)
        with shepherd_process("run", *app, env=env):
            task = asyncio.run(_ended(shared_store, hung))

    (a_charge,) = [c for c in payments.charges.values() if c["order"] == "A"]
    (b_charge,) = [c for c in payments.charges.values() if c["order"] == "B"]
    assert a_charge["key"] == f"{paid['id']}/1"
    assert b_charge["key"] == f"{hung}/1"
    assert payments.refunds == [b_charge["id"]], "the wrong charge was refunded"
    (undo,) = [s for s in task.steps if s.kind is StepKind.UNDO]
    assert undo.request["outcome"] == "unknown"
    assert undo.request["result"] is None
    assert undo.request["idempotency_key"] == f"{hung}/1"
    assert undo.result == {"refunded": [b_charge["id"]]}


async def _ended(url: str, task_id: str) -> Any:
    """Task `task_id` once it has ended `cancelled` (read through a plain App)."""
    async with App(url, alerts=()) as app:
        with pytest.raises(TaskFailedError) as failed:
            await app.result(task_id, timeout=PATIENCE)
        assert failed.value.state == "cancelled", failed.value
        return await app.get_task(task_id)
