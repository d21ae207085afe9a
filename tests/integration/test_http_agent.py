"""HTTP agents (`shepherd.agents.http`) against a real service under uvicorn, on both backends.

The service is scripted per test: each request it receives takes the next
behaviour from the script (the last one repeats) and is recorded with its
headers, its body and a server-side monotonic timestamp. The tests that wait
for a Retry-After or a window run on a FakeClock (`fake_time`) and move it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from shepherd import AgentRequest, App, PermanentError, ProcessState, RetryPolicy, StepState
from shepherd.agents.http import (
    HTTPPermanentError,
    HTTPTransientError,
    call_http,
    http_agent,
    http_client,
    parse_retry_after,
)
from shepherd.errors import TaskFailedError
from shepherd.testing import wait_until
from support.fake_time import WINDOW, has_event, pass_until, task_is
from support.http_service import serve
from support.spies import spy_on_replies

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from shepherd import WorkflowContext
    from shepherd.core.records import JsonValue, Task

#: Seconds a test waits for an outcome before it fails (a backstop, not a timing claim).
PATIENCE = 15.0
#: A retry policy that retries at once, so that only the service decides the waits.
QUICK = RetryPolicy(max_attempts=10, initial_delay=0.01, max_delay=0.02)


# -- the scripted service ---------------------------------------------------------------
@dataclass(frozen=True)
class Seen:
    """One request as the service received it."""

    at: float
    key: str | None
    attempt: str | None
    body: Any


class Dropped(Response):
    """Send the status line and headers, then break the connection mid-body."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]}
        )
        raise ConnectionAbortedError("the service drops the connection (on purpose)")


@dataclass
class Service:
    """What the test tells the service to do, and what it saw."""

    base_url: str = ""
    script: list[str] = field(default_factory=lambda: ["ok"])
    seen: list[Seen] = field(default_factory=list)
    #: Hung requests whose client went away (the agent cancelled the call).
    abandoned: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.base_url}/charges"

    async def endpoint(self, request: Request) -> Response:
        raw = await request.body()
        seen = Seen(
            at=time.monotonic(),
            key=request.headers.get("idempotency-key"),
            attempt=request.headers.get("x-shepherd-attempt"),
            body=None if not raw else await request.json(),
        )
        with self.lock:
            self.seen.append(seen)
            behaviour = self.script[min(len(self.seen), len(self.script)) - 1]
        return await self.respond(behaviour, request, seen)

    async def respond(self, behaviour: str, request: Request, seen: Seen) -> Response:
        match behaviour.split(":"):
            case ["ok"]:
                return JSONResponse({"charged": seen.body, "key": seen.key})
            case ["text"]:
                return PlainTextResponse("charged")
            case ["empty"]:
                return Response(status_code=204)
            case ["status", code, *retry_after]:
                headers = {"Retry-After": retry_after[0]} if retry_after else None
                return PlainTextResponse("busy", status_code=int(code), headers=headers)
            case ["date", code]:
                when = datetime.now(UTC) + timedelta(seconds=30)
                headers = {"Retry-After": format_datetime(when, usegmt=True)}
                return PlainTextResponse("busy", status_code=int(code), headers=headers)
            case ["reject"]:
                return JSONResponse({"message": "card number invalid"}, status_code=422)
            case ["error", field_name]:
                return JSONResponse({field_name: {"message": "ledger closed"}}, status_code=409)
            case ["long"]:
                return PlainTextResponse("x" * 5000, status_code=500)
            case ["hang"]:
                # An event that never fires: the call hangs until its client gives up.
                # Waiting for the disconnect (not forever) lets the server stop afterwards.
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                with self.lock:
                    self.abandoned.append(seen.key)
                return Response(status_code=499)
            case ["drop"]:
                return Dropped()
        raise AssertionError(f"unknown behaviour {behaviour!r}")


@pytest.fixture
def service() -> Iterator[Service]:
    svc = Service()
    app = Starlette(routes=[Route("/charges", svc.endpoint, methods=["POST", "GET"])])
    with serve(app) as base_url:
        svc.base_url = base_url
        yield svc


async def ended(app: App, task_id: str) -> Task:
    with contextlib.suppress(TaskFailedError):
        await app.result(task_id, timeout=PATIENCE)
    return await app.get_task(task_id)


def pay_workflow(app: App, *, within: float | None = None, complete_within: float = 5.0) -> None:
    @app.workflow("pay", complete_within=complete_within)
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        return await ctx.call("payments.charge", data, within=within)


# -- through the App ----------------------------------------------------------------------
async def test_503s_are_retried_with_the_same_idempotency_key_until_a_200(
    app: App, service: Service
) -> None:
    service.script = ["status:503", "status:503", "status:503", "ok"]
    http_agent(app, "payments.charge", "POST", service.url, within=5, retry=QUICK)
    pay_workflow(app)

    async with app.running():
        task_id = await app.submit("pay", {"amount": 5})
        result = await app.result(task_id, timeout=PATIENCE)

    key = f"{task_id}/1"
    assert result == {"charged": {"amount": 5}, "key": key}
    assert len(service.seen) == 4
    assert {s.key for s in service.seen} == {key}
    assert {s.attempt for s in service.seen} == {"1"}
    assert [s.body for s in service.seen] == [{"amount": 5}] * 4
    task = await app.get_task(task_id)
    assert task.process_state is ProcessState.PROCESSED
    assert task.failure_count == 0
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 1)]


@pytest.mark.fake_time
async def test_retry_after_is_honoured(app: App, service: Service) -> None:
    service.script = ["status:503:1", "ok"]
    # Without Retry-After the agent would retry at once: the service sets the pace.
    no_wait = RetryPolicy(max_attempts=3, initial_delay=0.0, max_delay=0.0)
    http_agent(app, "payments.charge", "POST", service.url, within=10, retry=no_wait)
    pay_workflow(app, complete_within=15.0)

    async with app.running():
        task_id = await app.submit("pay", {"amount": 1})
        # The agent sleeps the second the service asked for, on the app's clock.
        await pass_until(
            app, task_is(app, task_id, lambda t: t.process_state is ProcessState.PROCESSED)
        )
        assert await app.result(task_id, timeout=PATIENCE) == {
            "charged": {"amount": 1},
            "key": f"{task_id}/1",
        }

    first, second = service.seen
    assert first.at < second.at
    assert first.key == second.key == f"{task_id}/1"


@pytest.mark.fake_time
async def test_a_hung_call_is_cancelled_at_complete_by_and_replies_nothing(
    app: App, service: Service
) -> None:
    service.script = ["hang", "ok"]
    replies = spy_on_replies(app)
    http_agent(app, "payments.charge", "POST", service.url, retry=QUICK)
    pay_workflow(app, within=WINDOW, complete_within=5 * WINDOW)

    async with app.running():
        task_id = await app.submit("pay", {"amount": 2})
        await wait_until(lambda: len(service.seen) == 1, timeout=PATIENCE)  # the call hangs
        await pass_until(app, has_event(app, task_id, "reset"))
        result = await app.result(task_id, timeout=PATIENCE)
        await wait_until(
            lambda: bool(service.abandoned),
            timeout=PATIENCE,
            message="the service never saw the hung call go away",
        )

    key = f"{task_id}/1"
    assert result == {"charged": {"amount": 2}, "key": key}
    assert [(s.key, s.attempt) for s in service.seen] == [(key, "1"), (key, "2")]
    assert service.abandoned == [key]
    assert replies == [(2, True)], "the cancelled attempt must reply nothing"
    task = await app.get_task(task_id)
    assert task.failure_count >= 1
    assert [(s.state, s.attempt) for s in task.steps] == [(StepState.COMPLETED, 2)]
    history = [e.kind for e in await app.history(task_id)]
    assert "reset" in history
    assert "step_timed_out" in history


async def test_a_422_fails_the_step_at_once_with_the_services_message(
    app: App, service: Service
) -> None:
    service.script = ["reject"]
    seen: list[PermanentError] = []
    http_agent(app, "payments.charge", "POST", service.url, within=5, retry=QUICK)

    @app.workflow("pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        try:
            return await ctx.call("payments.charge", data)
        except PermanentError as exc:
            seen.append(exc)
            raise

    async with app.running():
        task_id = await app.submit("pay", {"card": "4242"})
        task = await ended(app, task_id)

    assert len(service.seen) == 1
    assert task.process_state is ProcessState.COMPENSATED
    assert "card number invalid" in task.error["reason"]
    assert "422" in task.error["reason"]
    (error,) = seen
    assert "card number invalid" in error.message
    assert [s.state for s in task.steps] == [StepState.FAILED]


async def test_an_http_undo_sends_the_undone_steps_key_and_outcome_in_its_body(
    app: App, service: Service
) -> None:
    service.script = ["ok", "reject", "ok"]
    http_agent(app, "payments.charge", "POST", service.url, within=5, retry=QUICK)
    http_agent(app, "payments.refund", "POST", service.url, within=5, retry=QUICK)

    @app.workflow("pay")
    async def pay(ctx: WorkflowContext, data: Any) -> JsonValue:
        await ctx.call("payments.charge", data, undo="payments.refund")
        return await ctx.call("payments.charge", data)  # refused: the first one is undone

    async with app.running():
        task_id = await app.submit("pay", {"amount": 5})
        task = await ended(app, task_id)

    assert task.process_state is ProcessState.COMPENSATED
    charged, _refused, refund = service.seen
    assert refund.key == f"{task_id}/3"  # the undo's own key: a retried refund is the same
    assert refund.body == {
        "request": {"amount": 5},
        "result": {"charged": {"amount": 5}, "key": charged.key},
        "seq": 1,
        "idempotency_key": charged.key,
        "outcome": "completed",
    }
    assert charged.key == f"{task_id}/1"


async def test_a_dropped_connection_is_retried(app: App, service: Service) -> None:
    service.script = ["drop", "drop", "ok"]
    http_agent(app, "payments.charge", "POST", service.url, within=5, retry=QUICK)
    pay_workflow(app)

    async with app.running():
        task_id = await app.submit("pay", {"amount": 3})
        result = await app.result(task_id, timeout=PATIENCE)

    key = f"{task_id}/1"
    assert result == {"charged": {"amount": 3}, "key": key}
    assert [s.key for s in service.seen] == [key] * 3
    assert (await app.get_task(task_id)).failure_count == 0


# -- call_http alone: the mapping of outcomes -------------------------------------------
@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[App]:
    """An App that is never run: only its shared HTTP client is used."""
    app = App(f"sqlite:///{tmp_path}/bare.db", alerts=[])
    try:
        yield app
    finally:
        await app.close()


def agent_request(attempt: int = 1) -> AgentRequest:
    return AgentRequest(
        payload={"amount": 1},
        idempotency_key="t-1/1",
        attempt=attempt,
        retry=0,
        complete_by=datetime.now(UTC) + timedelta(seconds=30),
        task_id="t-1",
        seq=1,
        agent="payments.charge",
    )


async def test_call_http_sends_the_idempotency_headers_and_maps_success_bodies(
    bare: App, service: Service
) -> None:
    service.script = ["ok", "text", "empty"]
    request = agent_request(attempt=3)

    assert await call_http(bare, request, "POST", service.url, json={"a": 1}) == {
        "charged": {"a": 1},
        "key": "t-1/1",
    }
    spoofed = {"idempotency-key": "mine", "X-SHEPHERD-ATTEMPT": "9", "Authorization": "t"}
    assert await call_http(bare, request, "POST", service.url, headers=spoofed) == "charged"
    assert await call_http(bare, request, "GET", service.url) is None
    assert [(s.key, s.attempt, s.body) for s in service.seen] == [
        ("t-1/1", "3", {"a": 1}),
        ("t-1/1", "3", None),
        ("t-1/1", "3", None),
    ]


@pytest.mark.parametrize("status", [429, 502, 503, 504])
async def test_overload_statuses_are_transient_with_retry_after(
    bare: App, service: Service, status: int
) -> None:
    service.script = [f"status:{status}:7", f"date:{status}", f"status:{status}"]

    errors: list[HTTPTransientError] = []
    for _ in range(3):
        with pytest.raises(HTTPTransientError) as caught:
            await call_http(bare, agent_request(), "POST", service.url, json={})
        errors.append(caught.value)

    assert [e.status for e in errors] == [status] * 3
    assert errors[0].retry_after == 7.0
    assert errors[1].retry_after is not None
    assert 0 < errors[1].retry_after <= 30
    assert errors[2].retry_after is None
    assert f"HTTP {status}" in errors[0].message


@pytest.mark.parametrize(
    ("behaviour", "status", "said"),
    [
        ("reject", 422, "card number invalid"),
        ("error:error", 409, "ledger closed"),
        ("error:message", 409, "ledger closed"),
    ],
)
async def test_other_statuses_are_permanent_with_the_services_message(
    bare: App, service: Service, behaviour: str, status: int, said: str
) -> None:
    service.script = [behaviour]

    with pytest.raises(HTTPPermanentError) as caught:
        await call_http(bare, agent_request(), "POST", service.url, json={})

    assert caught.value.status == status
    assert caught.value.message.endswith(f": {said}")
    assert f"POST {service.url} -> HTTP {status}" in caught.value.message
    assert caught.value.detail["status"] == status


async def test_a_long_error_body_is_truncated(bare: App, service: Service) -> None:
    service.script = ["long"]

    with pytest.raises(HTTPPermanentError) as caught:
        await call_http(bare, agent_request(), "POST", service.url, json={})

    assert 500 <= len(caught.value.message) < 600
    assert caught.value.message.endswith("x…")


async def test_a_refused_connection_is_transient(bare: App) -> None:
    with socket_closed() as url, pytest.raises(HTTPTransientError) as caught:
        await call_http(bare, agent_request(), "POST", url, json={})

    assert caught.value.status is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


async def test_the_shared_client_is_closed_with_the_app(tmp_path: Path, service: Service) -> None:
    app = App(f"sqlite:///{tmp_path}/c.db", alerts=[])
    client = http_client(app)
    assert http_client(app) is client
    await call_http(app, agent_request(), "POST", service.url, json={})

    await app.close()

    assert client.is_closed
    reopened = http_client(app)
    assert reopened is not client
    await app.close()
    assert reopened.is_closed


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("0", 0.0),
        ("120", 120.0),
        (" 5 ", 5.0),
        ("Wed, 01 Jan 2030 00:00:30 GMT", 30.0),
        ("Tue, 31 Dec 2029 23:59:00 GMT", 0.0),  # in the past: at once
        ("-1", None),
        ("1.5", None),
        ("soon", None),
        ("²", None),
    ],
)
def test_parse_retry_after(header: str | None, expected: float | None) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert parse_retry_after(header, now=now) == expected


@contextlib.contextmanager
def socket_closed() -> Iterator[str]:
    """A loopback URL nothing listens on (the port was bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}/charges"
