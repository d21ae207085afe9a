"""Operator alerts: what an alert says, and the sinks that deliver it.

An alert is `firing` when its task needs an operator, and `resolved` when the
task later ended well (processed, compensated or cancelled): every sink is
told both, in Alertmanager's words (`status`). A sink never raises: a broken
webhook must not stop the supervisor. Failures are logged on the
`shepherd.alerts` logger instead.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol, final, runtime_checkable

import httpx

from shepherd.core.records import JsonValue
from shepherd.errors import ConfigError
from shepherd.tasklog import task_fields

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.records import CallRequest, Task

__all__ = [
    "Alert",
    "AlertSink",
    "CallableSink",
    "Deliveries",
    "LogSink",
    "RaiseAlert",
    "WebhookSink",
    "resolved_alert",
    "send_all",
    "sink_from_spec",
]

logger = logging.getLogger("shepherd.alerts")


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """A task that needs an operator, and why; or, resolved, that it no longer does. No payloads.

    Attributes:
        task_id: The task's id.
        workflow: The task's workflow name.
        key: The task's business key, if it has one.
        reason: Why the task needs (needed) an operator.
        failure_count: Expirations and failures so far.
        at: When the alert was raised, or resolved (aware UTC).
        status: `firing` (the task needs an operator) or `resolved` (its task
            ended well since).
        alert_id: The stored alert's id (a resolution names it; a firing
            alert is sent before its id is read back: None).
        resolved_by: What resolved it (`task processed`, `task cancelled by
            anna`); None while firing.
    """

    task_id: str
    workflow: str
    key: str | None
    reason: str
    failure_count: int
    at: datetime
    status: Literal["firing", "resolved"] = "firing"
    alert_id: int | None = None
    resolved_by: str | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """Return the alert as a JSON object, `at` in ISO 8601; a resolution says by what."""
        out: dict[str, JsonValue] = {
            "status": self.status,
            "task_id": self.task_id,
            "workflow": self.workflow,
            "key": self.key,
            "reason": self.reason,
            "failure_count": self.failure_count,
            "at": self.at.isoformat(),
        }
        if self.status == "resolved":
            out["alert_id"] = self.alert_id
            out["resolved_at"] = out["at"]
            out["resolved_by"] = self.resolved_by
        return out


def resolved_alert(stored: StoredAlert) -> Alert:
    """What the sinks are told of a stored alert once resolved: its task, its last reason, by what."""
    return Alert(
        task_id=stored.task_id,
        workflow=stored.workflow,
        key=stored.key,
        reason=stored.reason,
        failure_count=stored.failure_count,
        at=stored.resolved_at or stored.raised_at,
        status="resolved",
        alert_id=stored.id,
        resolved_by=stored.resolved_by,
    )


@runtime_checkable
class AlertSink(Protocol):
    """Somewhere alerts go. Implementations should not raise."""

    async def send(self, alert: Alert) -> None:
        """Deliver one alert."""
        ...


class RaiseAlert(Protocol):
    """How a role hands a task to an operator (`App.raise_alert`): it returns at once."""

    def __call__(self, task: Task, *, reason: str, failure_count: int | None = None) -> None:
        """Alert every sink about `task`, in the background.

        Args:
            task: The task that needs an operator.
            reason: Why.
            failure_count: The count to report (default: the task's own).
        """
        ...


@final
class LogSink:
    """Logs each firing alert at ERROR, and each resolution at INFO, on the `shepherd.alerts` logger."""

    __slots__ = ()

    async def send(self, alert: Alert) -> None:
        """Log the alert."""
        if alert.status == "resolved":
            logger.info(
                "alert %s for task %s resolved: %s (workflow %s%s, at %s)",
                alert.alert_id,
                alert.task_id,
                alert.resolved_by,
                alert.workflow,
                "" if alert.key is None else f", key {alert.key}",
                alert.at.isoformat(),
                extra={
                    "alert": alert.to_json(),
                    **task_fields(alert.task_id, alert.workflow, epoch=None),
                },
            )
            return
        logger.error(
            "task %s needs an operator: %s (workflow %s%s, failures %d, at %s)",
            alert.task_id,
            alert.reason,
            alert.workflow,
            "" if alert.key is None else f", key {alert.key}",
            alert.failure_count,
            alert.at.isoformat(),
            extra={
                "alert": alert.to_json(),
                **task_fields(alert.task_id, alert.workflow, epoch=None),
            },
        )


@final
class WebhookSink:
    """POSTs each alert as JSON to a URL; failures are logged, never raised.

    Args:
        url: An http:// or https:// URL.
        timeout: Seconds before the request is abandoned.
    """

    __slots__ = ("_timeout", "url")

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self.url = url
        self._timeout = timeout

    async def send(self, alert: Alert) -> None:
        """POST the alert; log if the request fails or the answer is not 2xx."""
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.post(self.url, json=alert.to_json())
                response.raise_for_status()
        except Exception as exc:  # a sink must never break the supervisor
            logger.error(
                "alert for task %s not delivered to webhook %s: %s",
                alert.task_id,
                _redact(self.url),
                _describe(exc),
            )

    def __repr__(self) -> str:
        return f"WebhookSink({_redact(self.url)!r})"


@final
class CallableSink:
    """Calls a function with each alert; it may be sync or async. Exceptions are logged.

    Args:
        fn: Called as `fn(alert)`; if it returns an awaitable, that is awaited.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Alert], object]) -> None:
        self.fn = fn

    async def send(self, alert: Alert) -> None:
        """Call the function with the alert; log what it raises."""
        try:
            outcome = self.fn(alert)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:  # a sink must never break the supervisor
            logger.exception("alert sink %r failed for task %s", self.fn, alert.task_id)


@final
class Deliveries:
    """An App's alerts on their way to its sinks: sent in the background, awaited at close.

    A firing alert is sent without waiting (a role that escalates goes on at
    once); a resolution is awaited by the supervisor that tells it, so that it
    is marked told only once every sink had its turn. Neither raises.
    """

    __slots__ = ("_jobs", "clock", "sinks")

    def __init__(self, sinks: list[AlertSink], clock: Clock) -> None:
        self.sinks = sinks
        self.clock = clock
        self._jobs: set[asyncio.Task[None]] = set()

    def firing(self, subject: str, workflow: str, key: str | None, reason: str, count: int) -> None:
        """Send a firing alert about `subject` (a task's id, or a call's) to every sink, in the background."""
        alert = Alert(
            task_id=subject,
            workflow=workflow,
            key=key,
            reason=reason,
            failure_count=count,
            at=self.clock.now(),
        )
        job = asyncio.get_running_loop().create_task(send_all(self.sinks, alert))
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)

    def call_given_up(self, call: CallRequest) -> None:
        """Send a firing alert about an `app.call` given up after its handlings kept failing."""
        reason = (
            f"call to {call.agent} given up after {call.attempt} handlings without an "
            f"answer (each died or took longer than {call.within:g} s); its caller got "
            "a CallFailedError"
        )
        self.firing(call.call_id, f"call:{call.agent}", None, reason, call.attempt)

    def owner_failing(self, agent: str, key: str, failures: int, error: str) -> None:
        """Send a firing alert about a key of `agent` whose `on_acquire` keeps failing."""
        reason = (
            f"{agent}: on_acquire of key {key!r} failed {failures} times in a row "
            f"(last: {error}); the key's calls wait for an owner whose on_acquire succeeds"
        )
        self.firing(f"{agent}/{key}", f"owner:{agent}", key, reason, failures)

    async def resolved(self, alert: StoredAlert) -> None:
        """Tell every sink that a stored alert was resolved (`status` `resolved`)."""
        await send_all(self.sinks, resolved_alert(alert))

    async def drain(self) -> None:
        """Wait for the firing alerts still on their way."""
        if self._jobs:
            await asyncio.gather(*self._jobs, return_exceptions=True)


async def send_all(sinks: Iterable[AlertSink], alert: Alert) -> None:
    """Send one alert to every sink concurrently; a failing sink is logged, not raised.

    Args:
        sinks: Where the alert goes.
        alert: The alert.
    """
    sinks = list(sinks)
    outcomes = await asyncio.gather(*(sink.send(alert) for sink in sinks), return_exceptions=True)
    for sink, outcome in zip(sinks, outcomes, strict=True):
        if isinstance(outcome, Exception):
            logger.error("alert sink %r failed for task %s", sink, alert.task_id, exc_info=outcome)
        elif isinstance(outcome, BaseException):
            raise outcome


def sink_from_spec(spec: str | AlertSink | Callable[[Alert], object]) -> AlertSink:
    """Build a sink from a short description.

    Args:
        spec: `"log"`, an `http://` or `https://` URL, an AlertSink, or a
            function taking an Alert (sync or async).

    Returns:
        The sink.

    Raises:
        ConfigError: The spec is none of those (field `alerts`).
    """
    if isinstance(spec, str):
        if spec == "log":
            return LogSink()
        if spec.startswith(("http://", "https://")):
            return WebhookSink(spec)
        shown = _redact(spec) if "://" in spec else repr(spec)
        raise ConfigError(
            "alerts", f"unknown alert sink {shown}: expected 'log', an http(s):// URL or a callable"
        )
    if isinstance(spec, AlertSink):
        return spec
    if callable(spec):
        return CallableSink(spec)
    raise ConfigError(
        "alerts",
        f"unknown alert sink of type {type(spec).__name__}: expected 'log', an http(s):// URL or a callable",
    )


def _redact(url: str) -> str:
    """The URL without credentials or query string, which may hold secrets."""
    try:
        parsed = httpx.URL(url)
    except Exception:
        return "<invalid URL>"
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def _describe(exc: Exception) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
