"""The agents how-to's refund example: shown whole, and it refunds the right charge for each outcome.

Its handler runs here against a real payments service holding charges filed
by idempotency key; tests/e2e/test_refund_after_crash.py runs the whole
example in worker processes, one of them SIGKILLed mid-charge.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from doctools import DOCS, code_blocks
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from shepherd import AgentRequest
from support.http_service import serve

PAGE = DOCS / "howto" / "agents.md"
EXAMPLE = DOCS / "howto" / "refund_app.py"

#: The charges the service holds: two orders' charges, each under its step's key.
CHARGES = [
    {"id": "ch_1", "key": "task-a/1", "order": "A"},
    {"id": "ch_2", "key": "task-b/1", "order": "B"},
]


def test_the_page_shows_the_refund_example_whole() -> None:
    blocks = [b.text for b in code_blocks(PAGE.read_text(), "python")]
    assert EXAMPLE.read_text() in blocks


@pytest.fixture
def refunded() -> Iterator[tuple[str, list[str]]]:
    """The payments service's URL, and the ids of the charges it refunded, in order."""
    done: list[str] = []

    async def find(request: Request) -> JSONResponse:
        key = request.query_params["idempotency_key"]
        return JSONResponse([c for c in CHARGES if c["key"] == key])

    async def refund(request: Request) -> JSONResponse:
        done.append(request.path_params["id"])
        return JSONResponse({"refunded": True})

    service = Starlette(
        routes=[
            Route("/charges", find, methods=["GET"]),
            Route("/charges/{id}/refund", refund, methods=["POST"]),
        ]
    )
    with serve(service) as url:
        yield url, done


@pytest.fixture
async def example(
    refunded: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> AsyncIterator[ModuleType]:
    """The example module, imported with PAYMENTS_URL naming the test's service."""
    monkeypatch.setenv("PAYMENTS_URL", refunded[0])
    monkeypatch.setenv("SHEPHERD_STORE", f"sqlite:///{tmp_path}/refunds.db")
    spec = importlib.util.spec_from_file_location("refund_app", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "refund_app", module)
    spec.loader.exec_module(module)
    yield module
    await module.app.close()


def undo_of(seq_key: str, outcome: str, result: Any) -> AgentRequest:
    """The request an undo of the charge step `seq_key` receives."""
    task_id = seq_key.split("/")[0]
    return AgentRequest(
        payload={
            "request": {"id": "?"},
            "result": result,
            "seq": 1,
            "idempotency_key": seq_key,
            "outcome": outcome,
        },
        idempotency_key=f"{task_id}/2",
        attempt=1,
        retry=0,
        complete_by=datetime.now(UTC) + timedelta(seconds=30),
        task_id=task_id,
        seq=2,
        agent="payments.refund",
    )


@pytest.mark.parametrize(
    ("key", "outcome", "result", "expected"),
    [
        ("task-b/1", "completed", CHARGES[1], ["ch_2"]),
        ("task-b/1", "unknown", None, ["ch_2"]),  # found by the charge step's key alone
        ("task-c/1", "unknown", None, []),  # never charged: nothing to refund
    ],
)
async def test_the_refund_refunds_the_charge_of_its_step_whatever_the_outcome(
    example: ModuleType,
    refunded: tuple[str, list[str]],
    key: str,
    outcome: str,
    result: Any,
    expected: list[str],
) -> None:
    answer = await example.refund(undo_of(key, outcome, result))

    assert answer == {"refunded": expected}
    assert refunded[1] == expected
