from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shepherd.alerts import (
    Alert,
    AlertSink,
    CallableSink,
    LogSink,
    WebhookSink,
    resolved_alert,
    send_all,
    sink_from_spec,
)
from shepherd.core.alerts import AlertState, StoredAlert
from shepherd.errors import ConfigError
from support.http_service import serve

ALERT = Alert(
    task_id="t-1",
    workflow="order",
    key="order-42",
    reason="complete_by expired 5 times",
    failure_count=5,
    at=datetime(2030, 1, 1, 12, 0, tzinfo=UTC),
)


def _recording_app(received: list[Any]) -> Starlette:
    async def alerts(request: Request) -> Response:
        received.append(await request.json())
        return JSONResponse({"ok": True})

    async def broken(request: Request) -> Response:
        return JSONResponse({"error": "boom"}, status_code=500)

    return Starlette(
        routes=[
            Route("/alerts", alerts, methods=["POST"]),
            Route("/broken", broken, methods=["POST"]),
        ]
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


RESOLVED = Alert(
    task_id="t-1",
    workflow="order",
    key="order-42",
    reason="complete_by expired 5 times",
    failure_count=5,
    at=datetime(2030, 1, 1, 12, 30, tzinfo=UTC),
    status="resolved",
    alert_id=7,
    resolved_by="task processed",
)


def test_to_json() -> None:
    assert ALERT.to_json() == {
        "status": "firing",
        "task_id": "t-1",
        "workflow": "order",
        "key": "order-42",
        "reason": "complete_by expired 5 times",
        "failure_count": 5,
        "at": "2030-01-01T12:00:00+00:00",
    }


def test_a_resolution_says_so_and_by_what() -> None:
    assert RESOLVED.to_json() == {
        "status": "resolved",
        "task_id": "t-1",
        "workflow": "order",
        "key": "order-42",
        "reason": "complete_by expired 5 times",
        "failure_count": 5,
        "at": "2030-01-01T12:30:00+00:00",
        "alert_id": 7,
        "resolved_at": "2030-01-01T12:30:00+00:00",
        "resolved_by": "task processed",
    }


def test_a_stored_alert_once_resolved_is_told_as_resolved() -> None:
    stored = StoredAlert(
        id=7,
        task_id="t-1",
        workflow="order",
        key="order-42",
        reason="complete_by expired 5 times",
        failure_count=5,
        raised_at=datetime(2030, 1, 1, 12, 0, tzinfo=UTC),
        state=AlertState.RESOLVED,
        times_raised=2,
        resolved_at=datetime(2030, 1, 1, 12, 30, tzinfo=UTC),
        resolved_by="task processed",
    )

    assert resolved_alert(stored) == RESOLVED


async def test_webhook_posts_the_alert_as_json() -> None:
    received: list[Any] = []
    with serve(_recording_app(received)) as base_url:
        await WebhookSink(f"{base_url}/alerts").send(ALERT)
    assert received == [ALERT.to_json()]


async def test_webhook_error_status_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    with serve(_recording_app([])) as base_url:
        await WebhookSink(f"{base_url}/broken?token=secret").send(ALERT)
    (record,) = [r for r in caplog.records if r.name == "shepherd.alerts"]
    assert record.levelno == logging.ERROR
    assert "t-1" in record.getMessage()
    assert "HTTP 500" in record.getMessage()
    assert "secret" not in record.getMessage()


async def test_unreachable_webhook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/alerts"
    await WebhookSink(url, timeout=2.0).send(ALERT)
    assert any(
        "not delivered" in r.getMessage() and "ConnectError" in r.getMessage()
        for r in caplog.records
    )


async def test_log_sink_logs_the_fields(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="shepherd.alerts"):
        await LogSink().send(ALERT)
    (record,) = caplog.records
    message = record.getMessage()
    for text in ("t-1", "order", "order-42", "complete_by expired 5 times", "failures 5"):
        assert text in message


async def test_log_sink_logs_a_resolution_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="shepherd.alerts"):
        await LogSink().send(RESOLVED)
    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        "alert 7 for task t-1 resolved: task processed "
        "(workflow order, key order-42, at 2030-01-01T12:30:00+00:00)"
    )


async def test_callable_sink_sync_and_async() -> None:
    seen: list[Alert] = []

    async def async_fn(alert: Alert) -> None:
        seen.append(alert)

    await CallableSink(seen.append).send(ALERT)
    await CallableSink(async_fn).send(ALERT)
    assert seen == [ALERT, ALERT]


@pytest.mark.parametrize("is_async", [False, True])
async def test_callable_sink_exceptions_are_logged(
    is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    def sync_fn(alert: Alert) -> None:
        raise RuntimeError("sink is down")

    async def async_fn(alert: Alert) -> None:
        raise RuntimeError("sink is down")

    await CallableSink(async_fn if is_async else sync_fn).send(ALERT)
    (record,) = caplog.records
    assert "t-1" in record.getMessage()
    assert record.exc_info is not None
    assert "sink is down" in str(record.exc_info[1])


async def test_send_all_reaches_every_sink_even_if_one_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    class Raising:
        async def send(self, alert: Alert) -> None:
            raise RuntimeError("custom sink bug")

    await send_all(
        [
            CallableSink(lambda a: seen.append("first")),
            Raising(),
            CallableSink(lambda a: seen.append("last")),
        ],
        ALERT,
    )
    assert sorted(seen) == ["first", "last"]
    assert any("custom sink bug" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


def test_sink_from_spec() -> None:
    assert isinstance(sink_from_spec("log"), LogSink)
    webhook = sink_from_spec("https://hooks.example/alerts")
    assert isinstance(webhook, WebhookSink)
    assert webhook.url == "https://hooks.example/alerts"
    assert isinstance(sink_from_spec("http://127.0.0.1:9/a"), WebhookSink)
    assert isinstance(sink_from_spec(print), CallableSink)
    existing = LogSink()
    assert sink_from_spec(existing) is existing


@pytest.mark.parametrize("spec", ["email", "ftp://user:pw@host/x", 42])
def test_sink_from_spec_refuses_unknown_specs(spec: Any) -> None:
    with pytest.raises(ConfigError, match="unknown alert sink") as caught:
        sink_from_spec(spec)
    assert caught.value.field == "alerts"
    assert "pw" not in str(caught.value)


def test_the_sinks_satisfy_the_protocol() -> None:
    sinks: list[AlertSink] = [LogSink(), WebhookSink("http://x"), CallableSink(print)]
    assert all(isinstance(s, AlertSink) for s in sinks)
